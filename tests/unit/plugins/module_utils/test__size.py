# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils._size import (
    SizeError,
    format_size,
    parse_count,
    parse_size,
    tmpfs_percent_bytes,
    tmpfs_size_bytes,
    tmpfs_size_option,
)

KIB, MIB, GIB, TIB = 1024, 1024 ** 2, 1024 ** 3, 1024 ** 4
RAM = 24 * GIB


@pytest.mark.parametrize(
    "expr, ram, expected",
    [
        (4096, None, 4096),
        ("4096", None, 4096),
        (" 100 ", None, 100),
        ("512K", None, 512 * KIB),
        ("512k", None, 512 * KIB),
        ("2G", None, 2 * GIB),
        ("2g", None, 2 * GIB),
        ("1.5G", None, 3 * GIB // 2),
        ("2GiB", None, 2 * GIB),
        ("2GB", None, 2 * GIB),
        ("2Gi", None, 2 * GIB),
        ("3 M", None, 3 * MIB),
        ("1T", None, TIB),
        ("1P", None, TIB * 1024),
        ("512B", None, 512),
        ("50%", RAM, 12 * GIB),
        ("150%", RAM, 36 * GIB),
        ("ram", RAM, RAM),
        ("ram / 2", RAM, 12 * GIB),
        ("ram * 0.25", RAM, 6 * GIB),
        ("min(ram / 2, 8G)", RAM, 8 * GIB),
        ("max(ram / 2, 8G)", RAM, 12 * GIB),
        ("min(1G, 2G, 512M)", None, 512 * MIB),
        ("MIN(RAM/2,8g)", RAM, 8 * GIB),
        ("(1G + 512M) * 2", None, 3 * GIB),
        ("2G - 1G", None, GIB),
        ("10% + 1G", RAM, round(RAM * 0.1) + GIB),
        ("-1G + 2G", None, GIB),
        ("ram / 3", 10, 3),
        ("1.4", None, 1),
        ("1.5", None, 2),
    ],
)
def test_parse_size_valid(expr, ram, expected):
    assert parse_size(expr, ram_bytes=ram) == expected


@pytest.mark.parametrize(
    "expr, ram, words",
    [
        (0, None, "above zero"),
        ("0", None, "above zero"),
        ("-1G", None, "above zero"),
        ("1G - 2G", None, "above zero"),
        ("", None, "empty"),
        ("   ", None, "empty"),
        ("10X", None, "unknown unit 'X'"),
        ("2GiBs", None, "unknown unit"),
        ("50%", None, "RAM size"),
        ("ram / 2", None, "RAM size"),
        ("min(ram, 2G)", None, "RAM size"),
        ("1G / 0", None, "division by zero"),
        ("(1G", None, "expected ')'"),
        ("1G)", None, "unexpected"),
        ("1G 2G", None, "unexpected"),
        ("foo(1G)", None, "unknown name 'foo'"),
        ("__import__('os')", None, "unknown name"),
        ("1G; rm", None, "unexpected character"),
        ("2ram", RAM, "put an operator"),
        ("min()", None, "expected a number"),
        ("*2", None, "expected a number"),
        (None, None, "size is needed"),
        (True, None, "size is needed"),
        ([1], None, "number or a string"),
    ],
)
def test_parse_size_invalid(expr, ram, words):
    with pytest.raises(SizeError) as info:
        parse_size(expr, ram_bytes=ram)
    assert words in str(info.value)


def test_size_error_is_value_error():
    assert issubclass(SizeError, ValueError)


@pytest.mark.parametrize(
    "num, expected",
    [(0, "0 B"), (512, "512 B"), (1536, "1.5 KiB"), (2 * GIB, "2.0 GiB"), (3 * TIB // 2, "1.5 TiB"),
     (5 * MIB, "5.0 MiB")],
)
def test_format_size(num, expected):
    assert format_size(num) == expected


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("50%", "50%"),
        (" 25 % ", "25%"),
        ("2G", str(2 * GIB)),
        ("1000", "4096"),
        ("4097", "8192"),
        ("min(ram / 2, 8G)", str(8 * GIB)),
        ("ram / 3", str(-(-RAM // 3 // 4096) * 4096)),
        ("12.5%", str(-(-RAM // 8 // 4096) * 4096)),
    ],
)
def test_tmpfs_size_option(expr, expected):
    assert tmpfs_size_option(expr, RAM) == expected


def test_tmpfs_size_option_rejects_zero_percent():
    with pytest.raises(SizeError):
        tmpfs_size_option("0%", RAM)


@pytest.mark.parametrize(
    "pct, memtotal, expected",
    [
        (50, 25274793984, 12637396992),
        (50, 4096 * 3, 4096 * 2),  # 1.5 pages rounds up to 2
        (10, 4096 * 10 + 100, 4096),  # partial page of MemTotal is not counted
        (100, 8 * GIB, 8 * GIB),
    ],
)
def test_tmpfs_percent_bytes(pct, memtotal, expected):
    assert tmpfs_percent_bytes(pct, memtotal) == expected


def test_tmpfs_size_bytes_matches_option():
    assert tmpfs_size_bytes("50%", RAM) == tmpfs_percent_bytes(50, RAM)
    assert tmpfs_size_bytes("1000", RAM) == 4096


@pytest.mark.parametrize(
    "value, expected",
    [(1, 1), ("1000", 1000), ("1k", 1024), ("2M", 2 * MIB), ("1g", GIB), (" 7 ", 7)],
)
def test_parse_count_valid(value, expected):
    assert parse_count(value) == expected


@pytest.mark.parametrize("value", [0, -1, "0", "-5", "1.5", "1t", "", "abc", True, None, 1.0])
def test_parse_count_invalid(value):
    with pytest.raises(SizeError):
        parse_count(value)


PIB = 1024 ** 5
# Each value with what the planners' messages (format_size), the bench report (_bench.human_bytes) and
# ramdisk-status (_metrics.human) printed for it before the three became format_size: pinned byte for byte, but
# for None, which the planners' style now shows as "-" too where it raised TypeError.
# An exception's name stands for "raises it".
FORMATS = [
    (0, "0 B", "0 B", "0B"),
    (1, "1 B", "1 B", "1B"),
    (0.4, "0 B", "0 B", "0B"),
    (512, "512 B", "512 B", "512B"),
    (1023, "1023 B", "1023 B", "1023B"),
    (1023.9, "1023 B", "1023 B", "1023B"),
    (1024, "1.0 KiB", "1.0 KiB", "1.0K"),
    (1025, "1.0 KiB", "1.0 KiB", "1.0K"),
    # A fraction: the planners count whole bytes (1075 B is 1.0498 KiB), a measured figure keeps it (1.05 KiB).
    (1075.2, "1.0 KiB", "1.1 KiB", "1.1K"),
    (1536, "1.5 KiB", "1.5 KiB", "1.5K"),
    (1536.7, "1.5 KiB", "1.5 KiB", "1.5K"),
    (2047.9, "2.0 KiB", "2.0 KiB", "2.0K"),
    (MIB - 1, "1024.0 KiB", "1024.0 KiB", "1024.0K"),
    (MIB, "1.0 MiB", "1.0 MiB", "1.0M"),
    (3 * MIB // 2, "1.5 MiB", "1.5 MiB", "1.5M"),
    (5 * MIB, "5.0 MiB", "5.0 MiB", "5.0M"),
    (2 * GIB, "2.0 GiB", "2.0 GiB", "2.0G"),
    (3 * TIB // 2, "1.5 TiB", "1.5 TiB", "1.5T"),
    (1023 * TIB + TIB // 2, "1023.5 TiB", "1023.5 TiB", "1023.5T"),
    (PIB - 1, "1024.0 TiB", "1024.0 TiB", "1024.0T"),
    # The bench report and ramdisk-status stop at TiB; the planners go on to PiB, and give up at 1024 EiB.
    (PIB, "1.0 PiB", "1024.0 TiB", "1024.0T"),
    (5 * PIB, "5.0 PiB", "5120.0 TiB", "5120.0T"),
    (1024 * PIB, "1024.0 PiB", "1048576.0 TiB", "1048576.0T"),
    (1024 ** 7 - 1, "1048576.0 PiB", "1073741824.0 TiB", "1073741824.0T"),
    (1024 ** 7, "over 1024 EiB", "1073741824.0 TiB", "1073741824.0T"),
    (10 ** 400, "over 1024 EiB", "OverflowError", "OverflowError"),
    (-1, "-1 B", "-1 B", "-1B"),
    (-1023.5, "-1023 B", "-1023 B", "-1023B"),
    (-1536, "-1.5 KiB", "-1.5 KiB", "-1.5K"),
    (-2 * GIB, "-2.0 GiB", "-2.0 GiB", "-2.0G"),
    (-(1024 ** 7), "-over 1024 EiB", "-1073741824.0 TiB", "-1073741824.0T"),
    # Older cores hand the bench report numbers as text.
    ("2048", "2.0 KiB", "2.0 KiB", "2.0K"),
    ("1536.5", "ValueError", "1.5 KiB", "1.5K"),
    (None, "-", "-", "-"),
    (float("nan"), "ValueError", "nan TiB", "nanT"),
    (float("inf"), "OverflowError", "inf TiB", "infT"),
    (-float("inf"), "OverflowError", "-inf TiB", "-infT"),
]


def _shown(function, value):
    try:
        return function(value)
    except (TypeError, ValueError, OverflowError) as exc:
        return type(exc).__name__


STYLES = {"planned": format_size,
          "bench": lambda value: format_size(value, measured=True),
          "status": lambda value: format_size(value, short=True, measured=True)}


@pytest.mark.parametrize("value, style, expected",
                         [(row[0], style, text) for row in FORMATS for style, text in zip(STYLES, row[1:])])
def test_format_size_prints_each_style_as_before(value, style, expected):
    assert _shown(STYLES[style], value) == expected


@pytest.mark.parametrize("value, expected", [(512, "512B"), (1075.2, "1.0K"), (5 * PIB, "5.0P"), (-(1024 ** 7), "-over 1024E")])
def test_format_size_short_of_a_whole_size(value, expected):
    assert format_size(value, short=True) == expected
