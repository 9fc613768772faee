"""What users hand in, taken within bounds: files, JSON nesting, and text a provider can take.

A data file, a settings file or a spec is read whole and parsed by recursive parsers, so a device
(`/dev/zero`), a pipe, a gigabyte line or JSON nested 100,000 deep would otherwise end in a
MemoryError, a hang or a RecursionError instead of one line naming the file. Each check raises
ValueError (OSError for a file that cannot be opened) with what is wrong; the caller adds where.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
from pathlib import Path

__all__ = [
    "MAX_DATA_BYTES",
    "MAX_LINE_BYTES",
    "MAX_NESTING",
    "MAX_SETTINGS_BYTES",
    "check_nesting",
    "check_unicode",
    "decode_text",
    "read_regular_file",
    "read_text_file",
]

# A benchmark's data (GSM8K's 8,792 items take 4.8 MB) and one item of it (a million tokens of
# context is about 4 MB of text); a settings file (YAML, a design space) is a few lines.
MAX_DATA_BYTES = 256 * 2**20
MAX_LINE_BYTES = 8 * 2**20
MAX_SETTINGS_BYTES = 2**20
# Arrays and objects inside one another; no benchmark item or spec needs more than a handful.
MAX_NESTING = 64

# A JSON string literal, escapes included: removed before counting brackets, which may be text.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def read_regular_file(path: Path, *, limit: int) -> bytes:
    """The bytes of the regular file at `path`, refused past `limit` bytes.

    Opened without blocking, so a pipe with no writer is refused instead of waiting for ever; a
    file that grows while it is read is refused as well.
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file (a folder, a device or a pipe)")
        if info.st_size > limit:
            raise ValueError(f"{info.st_size:,} bytes, more than the {limit:,} allowed")
        data = file.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"more than the {limit:,} bytes allowed")
    return data


def read_text_file(path: Path, *, limit: int) -> str:
    """The UTF-8 text of the regular file at `path` (see `read_regular_file`); whatever stops it,
    a missing file included, is a ValueError saying what."""
    try:
        data = read_regular_file(path, limit=limit)
    except OSError as error:
        raise ValueError(error.strerror or str(error)) from None
    return decode_text(data)


def decode_text(data: bytes) -> str:
    """`data` as UTF-8 text; a ValueError names the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"not UTF-8 text (byte {data[error.start]:#04x} at {error.start})"
        ) from None


def check_nesting(text: str, *, limit: int = MAX_NESTING) -> None:
    """Refuses JSON `text` with arrays and objects nested more than `limit` deep, before parsing.

    Brackets inside strings do not count. Text with fewer brackets than the limit is passed at
    once, so a plain item costs one count.
    """
    if text.count("[") + text.count("{") <= limit:
        return
    brackets = _BRACKET.findall(_JSON_STRING.sub("", text))
    steps = (1 if bracket in "[{" else -1 for bracket in brackets)
    deepest = max(itertools.accumulate(steps, initial=0))
    if deepest > limit:
        raise ValueError(f"arrays and objects nested {deepest} deep, more than the {limit} allowed")


def check_unicode(text: str) -> None:
    """Refuses text that cannot be sent anywhere as UTF-8: a lone surrogate, which JSON's
    `\\ud800` escapes (and nothing else read as UTF-8) can make; every request would fail on it."""
    found = _SURROGATE.search(text)
    if found is not None:
        raise ValueError(
            f"text holding a lone surrogate {found[0]!r} (a \\uXXXX escape of half a pair), "
            "which is not Unicode and no provider accepts"
        )
