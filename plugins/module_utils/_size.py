# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Size expressions for RAM-backed storage: ``2G``, ``50%``, ``min(ram / 2, 8G)``.

A tiny tokenizer and recursive-descent parser; nothing is ever passed to eval().
All units are binary (K = 1024), whatever their spelling (``2G``, ``2GiB``, ``2GB``).
Standard library only: the ramdisk role copies this file beside _metrics.py to the hosts (ramdisk-status).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

PAGE_SIZE = 4096

_UNIT_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
# Spellings after the letter: 2G, 2Gi, 2GiB, 2GB (all binary).
_UNIT_RE = re.compile(r"^(?:b|([kmgtp])(?:i?b?))$", re.IGNORECASE)
_TOKEN_RE = re.compile(
    r"\s*(?:"
    r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<suffix>%|[A-Za-z]+)?"
    r"|(?P<name>[A-Za-z_]+)"
    r"|(?P<op>[-+*/(),])"
    r")"
)
_PLAIN_PERCENT_RE = re.compile(r"^\s*(\d+)\s*%\s*$")
_FUNCTIONS = {"min": min, "max": max}


class SizeError(ValueError):
    """A size expression that cannot be used; the message is a plain sentence."""


def _unit_multiplier(suffix):
    match = _UNIT_RE.match(suffix)
    if match is None:
        raise SizeError(
            "unknown unit '%s'; use K, M, G, T or P (binary, e.g. 512M, 2G, 2GiB) or %% of RAM" % suffix
        )
    return 1024 ** _UNIT_POWERS[(match.group(1) or "").lower()]


def _tokenize(text):
    tokens = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None or match.end() == pos:
            raise SizeError("unexpected character '%s' at position %d" % (text[pos:].strip()[:1], pos + 1))
        pos = match.end()
        if match.group("number") is not None:
            value = Fraction(match.group("number"))
            suffix = match.group("suffix")
            if suffix is None:
                tokens.append(("num", value))
            elif suffix == "%":
                tokens.append(("pct", value))
            elif suffix.lower() in ("ram",) or suffix.lower() in _FUNCTIONS:
                raise SizeError("a number is directly followed by '%s'; put an operator between them" % suffix)
            else:
                tokens.append(("num", value * _unit_multiplier(suffix)))
        elif match.group("name") is not None:
            name = match.group("name").lower()
            if name != "ram" and name not in _FUNCTIONS:
                raise SizeError("unknown name '%s'; only ram, min() and max() are known" % match.group("name"))
            tokens.append(("name", name))
        else:
            tokens.append(("op", match.group("op")))
    tokens.append(("end", None))
    return tokens


class _Parser(object):
    """expr := term (('+'|'-') term)*; term := unary (('*'|'/') unary)*;
    unary := ('+'|'-') unary | primary; primary := number | pct | ram | func '(' expr {',' expr} ')' | '(' expr ')'."""

    def __init__(self, tokens, ram_bytes):
        self.tokens = tokens
        self.index = 0
        self.ram_bytes = ram_bytes

    def peek(self):
        return self.tokens[self.index]

    def take(self):
        token = self.tokens[self.index]
        self.index += 1
        return token

    def expect(self, op):
        kind, value = self.take()
        if kind != "op" or value != op:
            raise SizeError("expected '%s' but found %s" % (op, _describe((kind, value))))

    def ram(self, what):
        if self.ram_bytes is None:
            raise SizeError("%s needs the host's RAM size, which is not known here" % what)
        return Fraction(int(self.ram_bytes))

    def parse(self):
        value = self.expr()
        if self.peek()[0] != "end":
            raise SizeError("unexpected %s after a complete expression" % _describe(self.peek()))
        return value

    def expr(self):
        value = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            if self.take()[1] == "+":
                value += self.term()
            else:
                value -= self.term()
        return value

    def term(self):
        value = self.unary()
        while self.peek() in (("op", "*"), ("op", "/")):
            if self.take()[1] == "*":
                value *= self.unary()
            else:
                divisor = self.unary()
                if divisor == 0:
                    raise SizeError("division by zero")
                value /= divisor
        return value

    def unary(self):
        if self.peek() == ("op", "-"):
            self.take()
            return -self.unary()
        if self.peek() == ("op", "+"):
            self.take()
            return self.unary()
        return self.primary()

    def primary(self):
        kind, value = self.take()
        if kind == "num":
            return value
        if kind == "pct":
            return self.ram("a percentage") * value / 100
        if kind == "name" and value == "ram":
            return self.ram("'ram'")
        if kind == "name":
            self.expect("(")
            args = [self.expr()]
            while self.peek() == ("op", ","):
                self.take()
                args.append(self.expr())
            self.expect(")")
            return _FUNCTIONS[value](args)
        if (kind, value) == ("op", "("):
            inner = self.expr()
            self.expect(")")
            return inner
        raise SizeError("expected a number, 'ram', min(), max() or '(' but found %s" % _describe((kind, value)))


def _describe(token):
    kind, value = token
    if kind == "end":
        return "the end of the expression"
    if kind == "op":
        return "'%s'" % value
    if kind == "name":
        return "'%s'" % value
    return "a number"


def _round_half_up(value):
    return int((value + Fraction(1, 2)) // 1)


def parse_size(expr, ram_bytes=None):
    """Return the size in bytes that ``expr`` stands for; raise SizeError if it is not usable."""
    if isinstance(expr, bool) or expr is None:
        raise SizeError("a size is needed, not %r" % (expr,))
    if isinstance(expr, int):
        value = Fraction(expr)
    elif isinstance(expr, float):
        if not math.isfinite(expr):
            # YAML reads .inf and .nan as floats that no size can be.
            raise SizeError("not a finite number of bytes")
        value = Fraction(expr)
    elif isinstance(expr, str):
        if not expr.strip():
            raise SizeError("the size is empty")
        value = _Parser(_tokenize(expr), ram_bytes).parse()
    else:
        raise SizeError("a size must be a number or a string, not %s" % type(expr).__name__)
    result = _round_half_up(value)
    if result <= 0:
        raise SizeError("the size must be above zero, and this comes to %d bytes" % result)
    return result


_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_size(num_bytes, short=False, measured=False):
    """Bytes in binary units with one decimal, whole below 1 KiB: ``2.0 GiB``, ``512 B``; None (not known) is ``-``.

    short: the spelling of ramdisk-status, ``2.0G``, ``512B``. measured: a figure read off a host or a benchmark
    (a mean, a rate) keeps its fraction and is told in TiB at most, as the bench report and ramdisk-status print
    it; otherwise a size counts whole bytes, up to PiB, and 1024 EiB or more reads "over 1024 EiB".
    """
    if num_bytes is None:
        return "-"
    units = _UNITS[:5] if measured else _UNITS
    if not measured:
        num_bytes = int(num_bytes)
        if abs(num_bytes) >= 1024 ** 7:
            # Too large for a float, and for any host: say so rather than fail.
            return "%sover 1024%s" % ("-" if num_bytes < 0 else "", "E" if short else " EiB")
    value, power = float(num_bytes), 0
    while power < len(units) - 1 and not abs(value) < 1024:  # "not <": NaN goes to the top unit, as it always did
        value /= 1024.0
        power += 1
    return ("%d" if power == 0 else "%.1f") % value + ("" if short else " ") + (units[power][0] if short else units[power])


def round_up_pages(num_bytes):
    return -(-int(num_bytes) // PAGE_SIZE) * PAGE_SIZE


def tmpfs_percent_bytes(pct, memtotal_bytes):
    """Bytes the kernel gives ``size=<pct>%``: pct of the RAM pages, rounded up to whole pages."""
    pages = int(memtotal_bytes) // PAGE_SIZE
    size = int(pct) * pages * PAGE_SIZE // 100
    return round_up_pages(size)


def plain_percent(expr):
    """The integer percentage if ``expr`` is a plain ``N%`` string the kernel accepts, else None."""
    if isinstance(expr, str):
        match = _PLAIN_PERCENT_RE.match(expr)
        if match:
            return int(match.group(1))
    return None


def tmpfs_size_option(expr, ram_bytes):
    """Value for tmpfs ``size=``: ``N%`` kept as is (the kernel sizes it at mount time, so fstab
    stays right when RAM changes), otherwise exact bytes rounded up to whole pages."""
    pct = plain_percent(expr)
    if pct is not None:
        if pct <= 0:
            raise SizeError("the size must be above zero, and this is %d%%" % pct)
        return "%d%%" % pct
    return str(round_up_pages(parse_size(expr, ram_bytes)))


def tmpfs_size_bytes(expr, ram_bytes):
    """Bytes the kernel will give a tmpfs mounted with tmpfs_size_option(expr)."""
    pct = plain_percent(expr)
    if pct is not None:
        if pct <= 0:
            raise SizeError("the size must be above zero, and this is %d%%" % pct)
        if ram_bytes is None:
            raise SizeError("a percentage needs the host's RAM size, which is not known here")
        return tmpfs_percent_bytes(pct, ram_bytes)
    return round_up_pages(parse_size(expr, ram_bytes))


def parse_count(value):
    """A positive count with an optional kernel suffix (k, m, g: binary), e.g. nr_inodes=1m."""
    if isinstance(value, bool) or value is None:
        raise SizeError("a positive whole number is needed, not %r" % (value,))
    if isinstance(value, int):
        result = value
    elif isinstance(value, str):
        match = re.match(r"^\s*(\d+)\s*([kKmMgG]?)\s*$", value)
        if match is None:
            raise SizeError("'%s' is not a whole number with an optional k, m or g suffix" % value)
        result = int(match.group(1)) * 1024 ** " kmg".index(match.group(2).lower() or " ")
    else:
        raise SizeError("a positive whole number is needed, not %s" % type(value).__name__)
    if result <= 0:
        raise SizeError("the number must be above zero, and this is %d" % result)
    return result
