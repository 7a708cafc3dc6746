# SPDX-License-Identifier: GPL-3.0-or-later
"""fstab text: escapes as mount reads them, one line per mount point, every other byte kept."""

from __future__ import annotations

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._fstab import (
    escape,
    format_line,
    lines_for,
    parse,
    remove_entry,
    same,
    set_entry,
    unescape,
)

FSTAB = (
    "# /etc/fstab: static file system information.\n"
    "#\n"
    "# <file system>\t<mount point>\t<type>\t<options>\t<dump>\t<pass>\n"
    "UUID=1b2c\t/\text4\terrors=remount-ro\t0\t1\n"
    "\n"
    "   # an indented comment naming /var/cache/app\n"
    "/dev/sdb1   /srv/data   xfs   noatime   0   2\n"
    "tmpfs /var/cache/app tmpfs size=1G,mode=0755 0 0\n"
    "/swapfile none swap sw 0 0\n"
)
APP = ("tmpfs", "/var/cache/app", "tmpfs", "size=1G,mode=0755")

ESCAPES = [
    # (field, as written in fstab)
    ("/mnt/plain", "/mnt/plain"),
    ("/mnt/my disk", "/mnt/my\\040disk"),
    ("/mnt/tab\there", "/mnt/tab\\011here"),
    ("/mnt/new\nline", "/mnt/new\\012line"),
    ("/mnt/back\\slash", "/mnt/back\\134slash"),
    ("/mnt/\\040 literal", "/mnt/\\134040\\040literal"),
    ("/mnt/caf\u00e9 &#", "/mnt/caf\u00e9\\040&#"),
]


@pytest.mark.parametrize("field, written", ESCAPES)
def test_escape_round_trip(field, written):
    assert escape(field) == written
    assert unescape(written) == field


UNESCAPES = [
    # (as found in fstab, as mount reads it)
    ("/mnt/a\\046b", "/mnt/a&b"),  # ansible.posix.mount writes & as \046
    ("/mnt/caf\\303\\251", "/mnt/caf\u00e9"),  # UTF-8 bytes escaped one by one
    ("/mnt/not\\08", "/mnt/not\\08"),  # not three octal digits: kept
    ("/mnt/end\\", "/mnt/end\\"),
    ("LABEL=x\\040y", "LABEL=x y"),
]


@pytest.mark.parametrize("written, field", UNESCAPES)
def test_unescape(written, field):
    assert unescape(written) == field


def test_parse_keeps_every_byte_and_reads_entries():
    lines = parse(FSTAB)
    assert "".join(line["raw"] for line in lines) == FSTAB
    entries = [line["entry"] for line in lines if line["entry"]]
    assert [entry["path"] for entry in entries] == ["/", "/srv/data", "/var/cache/app", "none"]
    assert entries[1] == {"src": "/dev/sdb1", "path": "/srv/data", "fstype": "xfs", "options": "noatime",
                          "dump": "0", "passno": "2"}
    assert [line["entry"] for line in lines[:3]] == [None, None, None]


PARSE_LINES = [
    # (line, entry)
    ("tmpfs /t tmpfs\n", {"src": "tmpfs", "path": "/t", "fstype": "tmpfs", "options": "defaults", "dump": "0",
                          "passno": "0"}),
    ("tmpfs /t tmpfs rw\n", {"src": "tmpfs", "path": "/t", "fstype": "tmpfs", "options": "rw", "dump": "0",
                             "passno": "0"}),
    ("tmpfs /t tmpfs rw 1\r\n", {"src": "tmpfs", "path": "/t", "fstype": "tmpfs", "options": "rw", "dump": "1",
                                 "passno": "0"}),
    ("tmpfs /my\\040t tmpfs rw 00 0 extra\n", {"src": "tmpfs", "path": "/my t", "fstype": "tmpfs",
                                               "options": "rw", "dump": "0", "passno": "0"}),
    ("tmpfs /t\n", None),
    ("#tmpfs /t tmpfs rw 0 0\n", None),
    (" \t\n", None),
]


@pytest.mark.parametrize("line, entry", PARSE_LINES)
def test_parse_line(line, entry):
    assert parse(line) == [{"raw": line, "entry": entry}]


def test_lines_for_unescapes_the_path():
    text = FSTAB + "tmpfs /mnt/my\\040disk tmpfs rw 0 0\n"
    assert [line["raw"] for line in lines_for(text, "/mnt/my disk")] == ["tmpfs /mnt/my\\040disk tmpfs rw 0 0\n"]
    assert lines_for(text, "/mnt/my\\040disk") == []
    assert len(lines_for(FSTAB, "/var/cache/app")) == 1


def test_set_entry_replaces_in_place_and_keeps_the_rest():
    text = set_entry(FSTAB, "tmpfs", "/var/cache/app", "tmpfs", "size=2G,mode=0755")
    assert text == FSTAB.replace("size=1G", "size=2G")


def test_set_entry_appends_a_path_with_a_space():
    text = set_entry(FSTAB, "tmpfs", "/mnt/my disk", "tmpfs", "size=64M")
    assert text == FSTAB + "tmpfs /mnt/my\\040disk tmpfs size=64M 0 0\n"
    assert same(text, "tmpfs", "/mnt/my disk", "tmpfs", "size=64M")
    assert set_entry(text, "tmpfs", "/mnt/my disk", "tmpfs", "size=64M") is text


UNCHANGED = [
    # (text, fields already there)
    (FSTAB, APP),
    (FSTAB, ("UUID=1b2c", "/", "ext4", "errors=remount-ro", 0, 1)),
    # Other spacing, same fields: not rewritten.
    ("tmpfs\t/var/cache/app   tmpfs\tsize=1G,mode=0755\n", APP),
    ("tmpfs /var/cache/app tmpfs size=1G,mode=0755 0 0", APP),
    # What ansible.posix.mount wrote for a path with '&' (it escapes it as \046).
    ("tmpfs /srv/a\\040\\046\\040b tmpfs rw 0 0\n", ("tmpfs", "/srv/a & b", "tmpfs", "rw")),
]


@pytest.mark.parametrize("text, fields", UNCHANGED)
def test_set_entry_unchanged_is_the_same_object(text, fields):
    assert set_entry(text, *fields) is text


DUPLICATES = [
    # (text, expected after set_entry of APP with size=2G)
    ("a / ext4 rw 0 1\ntmpfs /var/cache/app tmpfs size=1G 0 0\n# keep\ntmpfs /var/cache/app tmpfs size=9G 0 0\n",
     "a / ext4 rw 0 1\ntmpfs /var/cache/app tmpfs size=2G 0 0\n# keep\n"),
    # The first line already right: only the later one goes.
    ("tmpfs /var/cache/app tmpfs size=2G\nb /b xfs rw 0 0\ntmpfs /var/cache/app tmpfs size=1G 0 0",
     "tmpfs /var/cache/app tmpfs size=2G\nb /b xfs rw 0 0\n"),
    # No trailing newline: one is added before the new line.
    ("a / ext4 rw 0 1", "a / ext4 rw 0 1\ntmpfs /var/cache/app tmpfs size=2G 0 0\n"),
    ("", "tmpfs /var/cache/app tmpfs size=2G 0 0\n"),
    ("\n", "\ntmpfs /var/cache/app tmpfs size=2G 0 0\n"),
]


@pytest.mark.parametrize("text, expected", DUPLICATES)
def test_set_entry_collapses_duplicates(text, expected):
    new = set_entry(text, "tmpfs", "/var/cache/app", "tmpfs", "size=2G")
    assert new == expected
    assert same(new, "tmpfs", "/var/cache/app", "tmpfs", "size=2G")
    assert set_entry(new, "tmpfs", "/var/cache/app", "tmpfs", "size=2G") is new


def test_set_entry_escapes_every_field():
    text = set_entry("", "//srv/share name", "/mnt/a\tb\\c", "cifs", "credentials=/etc/my creds", 0, 0)
    assert text == "//srv/share\\040name /mnt/a\\011b\\134c cifs credentials=/etc/my\\040creds 0 0\n"
    assert same(text, "//srv/share name", "/mnt/a\tb\\c", "cifs", "credentials=/etc/my creds")


@pytest.mark.parametrize("fields", [("", "/t", "tmpfs", "rw"), ("tmpfs", "/t", "tmpfs", None),
                                    ("tmpfs", "/t", "tmpfs", "rw", "x", 0)])
def test_format_line_refuses_bad_fields(fields):
    with pytest.raises(ValueError):
        format_line(*fields)


REMOVE = [
    # (text, path, expected)
    (FSTAB, "/var/cache/app", FSTAB.replace("tmpfs /var/cache/app tmpfs size=1G,mode=0755 0 0\n", "")),
    ("a /x t rw\n# c\na /x t ro\n", "/x", "# c\n"),
    ("# c\na /x t rw", "/x", "# c\n"),
    ("a /my\\040x t rw\n", "/my x", ""),
]


@pytest.mark.parametrize("text, path, expected", REMOVE)
def test_remove_entry(text, path, expected):
    assert remove_entry(text, path) == expected


def test_remove_entry_absent_is_the_same_object():
    assert remove_entry(FSTAB, "/not/there") is FSTAB


SAME = [
    # (text, fields, same)
    (FSTAB, APP, True),
    (FSTAB, ("tmpfs", "/var/cache/app", "tmpfs", "size=1G"), False),
    (FSTAB, ("tmpfs", "/not/there", "tmpfs", "rw"), False),
    (FSTAB + "tmpfs /var/cache/app tmpfs size=1G,mode=0755 0 0\n", APP, False),
    ("tmpfs /var/cache/app tmpfs size=1G,mode=0755 0 2\n", APP, False),
    ("tmpfs /var/cache/app tmpfs size=1G,mode=0755\n", APP, True),
]


@pytest.mark.parametrize("text, fields, expected", SAME)
def test_same(text, fields, expected):
    assert same(text, *fields) is expected
