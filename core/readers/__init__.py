"""Trace formats. A reader is a module with KIND (a word for messages), `accepts(head)` (the
first bytes after leading blanks) and `decode(path, data, cancel)` (a job returning a
`chrome.Decoded`: columns + metadata). Adding a format: a new module and one line in READERS.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from stallscope.core.errors import TraceError
from stallscope.core.readers import chrome
from stallscope.core.readers.source import first_non_blank

READERS = (chrome,)


def reader_for(p: Path, head: bytes):
    """The reader that takes a file starting with `head`, else a one-line TraceError."""
    wide = wide_encoding(head)
    if wide:
        raise TraceError(f"{p}: {wide} text; stallscope reads UTF-8: save it as UTF-8 "
                         f"(e.g. iconv -f {wide} -t UTF-8 IN > OUT)")
    for reader in READERS:
        if reader.accepts(head):
            return reader
    kinds = " or ".join(r.KIND for r in READERS)
    raise TraceError(f"{p}: not {kinds} (starts with {shown(head)})")


_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
         (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def wide_encoding(head: bytes) -> str | None:
    """UTF-16 or UTF-32 text, named as iconv must be told: "UTF-32" / "UTF-16" with a byte
    order mark (iconv reads it), else the byte order its ASCII shows ("UTF-32LE": a character
    then three zero bytes). None for anything else."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    for width, name in ((4, "UTF-32"), (2, "UTF-16")):
        text = head[:64 - 64 % width]
        if len(text) < 4 * width:
            continue
        columns = [text[i::width] for i in range(width)]
        zero = [c.count(0) == len(c) for c in columns]
        if zero.count(False) != 1:
            continue
        i = zero.index(False)
        if 0 in columns[i]:
            continue
        if i == 0:
            return f"{name}LE"
        if i == width - 1:
            return f"{name}BE"
    return None


def sniffer(p: Path) -> Callable[[bytes], None]:
    return lambda head: reader_for(p, head) and None


def shown(head: bytes, n: int = 24) -> str:
    """The first bytes of a file for a message: text in quotes, or a word for binary data."""
    text = head[:n].decode("utf-8", "replace")
    if text.count("\ufffd") > len(text) // 4 or "\0" in text:
        return "binary data"
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return f'"{text}{"..." if len(head) > n else ""}"'


def decode(p: Path, data: bytearray, cancel):
    """The job of the reader for this text (yields 400..1000 of 1000)."""
    first = first_non_blank(data)
    if first is None:
        raise TraceError(f"{p}: file is empty")
    reader = reader_for(p, bytes(data[first:first + 64]))
    decoded = yield from reader.decode(p, data, cancel)
    decoded.notes[:0] = getattr(data, "notes", [])  # what reading left out (source.Text)
    return decoded
