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
    if _utf16(head):
        raise TraceError(f"{p}: UTF-16 text; stallscope reads UTF-8: save it as UTF-8 "
                         "(e.g. iconv -f UTF-16 -t UTF-8 IN > OUT)")
    for reader in READERS:
        if reader.accepts(head):
            return reader
    kinds = " or ".join(r.KIND for r in READERS)
    raise TraceError(f"{p}: not {kinds} (starts with {shown(head)})")


def _utf16(head: bytes) -> bool:
    """Its byte order mark, or ASCII text with a zero byte after (or before) each character."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return True
    pairs = head[:64]
    return len(pairs) >= 8 and any(
        pairs[i::2].count(0) == len(pairs[i::2]) and 0 not in pairs[1 - i::2] for i in (0, 1))


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
