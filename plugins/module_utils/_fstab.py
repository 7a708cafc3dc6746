# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""/etc/fstab as text: find, set and drop the line of one mount point, every other byte kept as it was.

Lines are read the way libmount (mount, findmnt, systemd-fstab-generator) reads them: a line whose first
non-blank character is '#' is a comment, fields are separated by spaces or tabs, the first three are required,
options default to "defaults", dump and pass to 0, and '\\ooo' (three octal digits) is the byte ooo. A line
that is set is written as ansible.posix.mount writes it, the six fields joined by single spaces, so lines
either wrote compare equal by their fields. The text is only built here; _atomic.write_file writes it.
"""

from __future__ import annotations

import re

FIELDS = ("src", "path", "fstype", "options", "dump", "passno")
# What would end or split a field; glibc's getmntent decodes exactly these four, libmount any \ooo.
_ESCAPES = (("\\", "\\134"), (" ", "\\040"), ("\t", "\\011"), ("\n", "\\012"))
_OCTAL_RE = re.compile(rb"\\([0-7]{3})")


def escape(field):
    """FIELD as it is written in fstab: backslash, space, tab and newline as \\134, \\040, \\011, \\012."""
    for char, code in _ESCAPES:
        field = field.replace(char, code)
    return field


def unescape(field):
    """FIELD as mount reads it: each \\ooo (three octal digits) is the byte ooo; other text stays as it is."""
    if "\\" not in field:
        return field
    raw = field.encode("utf-8", "surrogateescape")
    raw = _OCTAL_RE.sub(lambda match: bytes((int(match.group(1), 8) & 0xFF,)), raw)
    return raw.decode("utf-8", "surrogateescape")


def _split_lines(text):
    # Only "\n" ends a line: str.splitlines would also split on \r, \v, \f and \x1c-\x1e inside a field.
    lines = text.split("\n")
    last = lines.pop()
    lines = [line + "\n" for line in lines]
    if last:
        lines.append(last)
    return lines


def _number(value):
    text = str(value).strip()
    return str(int(text)) if text.isdigit() else text


def _fields(raw):
    body = raw.rstrip("\n")
    if body.endswith("\r"):
        body = body[:-1]
    words = body.split()
    if not words or words[0].startswith("#") or len(words) < 3:
        return None
    words = words[:6]
    if len(words) < 4:
        words.append("defaults")
    while len(words) < 6:
        words.append("0")
    values = [unescape(word) for word in words]
    values[4], values[5] = _number(values[4]), _number(values[5])
    return dict(zip(FIELDS, values))


def parse(text):
    """Each line of TEXT as {"raw": the line with its newline, "entry": its six fields unescaped, or None}.

    A line with fewer than three fields, a comment or a blank line has no entry; "".join of the raws is TEXT.
    """
    return [{"raw": raw, "entry": _fields(raw)} for raw in _split_lines(text)]


def lines_for(text, path):
    """The parsed entry lines of TEXT whose mount point, unescaped, is PATH, in file order."""
    return [line for line in parse(text) if line["entry"] is not None and line["entry"]["path"] == path]


def format_line(src, path, fstype, options, dump=0, passno=0):
    """The line set_entry writes, with its newline."""
    for name, value in (("src", src), ("path", path), ("fstype", fstype), ("options", options)):
        if not isinstance(value, str) or not value:
            raise ValueError("fstab field %s must be a non-empty string, not %r" % (name, value))
    for name, value in (("dump", dump), ("passno", passno)):
        if not _number(value).isdigit():
            raise ValueError("fstab field %s must be a number, not %r" % (name, value))
    return "%s %s %s %s %s %s\n" % (escape(src), escape(path), escape(fstype), escape(options), _number(dump),
                                    _number(passno))


def _wanted(src, path, fstype, options, dump, passno):
    return {"src": src, "path": path, "fstype": fstype, "options": options, "dump": _number(dump),
            "passno": _number(passno)}


def set_entry(text, src, path, fstype, options, dump=0, passno=0):
    """TEXT with one line for PATH holding these fields; TEXT itself (the same object) when it already has it.

    The first line for PATH is replaced where it stands (kept byte for byte when its fields already match) and
    any later line for PATH dropped; with none, the line is appended, after a newline if TEXT lacks its last.
    """
    new_line = format_line(src, path, fstype, options, dump, passno)
    wanted = _wanted(src, path, fstype, options, dump, passno)
    out = []
    found = False
    changed = False
    for line in parse(text):
        entry = line["entry"]
        if entry is None or entry["path"] != path:
            out.append(line["raw"])
        elif found:
            changed = True
        else:
            found = True
            if entry == wanted:
                out.append(line["raw"])
            else:
                out.append(new_line)
                changed = True
    if not found:
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
        out.append(new_line)
        changed = True
    return "".join(out) if changed else text


def remove_entry(text, path):
    """TEXT without any line for PATH; TEXT itself (the same object) when it has none."""
    kept = [line["raw"] for line in parse(text) if line["entry"] is None or line["entry"]["path"] != path]
    new_text = "".join(kept)
    return text if new_text == text else new_text


def replace_lines(text, match, new_lines):
    """TEXT with the entry lines for which MATCH(entry) is true replaced by NEW_LINES (raw), where the first of them
    was, or at the end; every line ends in a newline."""
    out = []
    placed = False
    for line in parse(text):
        if line["entry"] is not None and match(line["entry"]):
            if not placed:
                out.extend(new_lines)
                placed = True
            continue
        out.append(line["raw"])
    if not placed:
        out.extend(new_lines)
    return "".join(item if item.endswith("\n") else item + "\n" for item in out)


def same(text, src, path, fstype, options):
    """Whether TEXT has exactly one line for PATH and it holds these fields, with dump and pass 0."""
    found = lines_for(text, path)
    return len(found) == 1 and found[0]["entry"] == _wanted(src, path, fstype, options, 0, 0)
