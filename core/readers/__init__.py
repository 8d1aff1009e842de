"""Trace formats. A reader is a module with KIND (a word for messages), `accepts(head)` (the
first bytes after leading blanks) and `decode(path, data, cancel)` (a job returning a
`chrome.Decoded`: columns + metadata). Adding a format: a new module and one line in READERS.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from stallscope.core.errors import TraceError
from stallscope.core.readers import chrome

READERS = (chrome,)


def reader_for(p: Path, head: bytes):
    """The reader that takes a file starting with `head`, else a one-line TraceError."""
    for reader in READERS:
        if reader.accepts(head):
            return reader
    kinds = " or ".join(r.KIND for r in READERS)
    raise TraceError(f"{p}: not {kinds} (starts with {shown(head)})")


def sniffer(p: Path) -> Callable[[bytes], None]:
    return lambda head: reader_for(p, head) and None


def shown(head: bytes, n: int = 24) -> str:
    """The first bytes of a file for a message: text in quotes, or a word for binary data."""
    text = head[:n].decode("utf-8", "replace")
    if text.count("\ufffd") > len(text) // 4 or "\0" in text:
        return "binary data"
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return f'"{text}{"..." if len(head) > n else ""}"'


_NON_SPACE = re.compile(rb"[^ \t\r\n]")


def decode(p: Path, data: bytearray, cancel):
    """The job of the reader for this text (yields 400..1000 of 1000)."""
    m = _NON_SPACE.search(data)
    if m is None:
        raise TraceError(f"{p}: file is empty")
    return reader_for(p, bytes(data[m.start():m.start() + 64])).decode(p, data, cancel)
