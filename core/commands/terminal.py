"""What reaches the terminal: names from traces, sessions and files with their control
characters escaped, so that a trace named ``\\x1b]0;pwned\\x07`` cannot set the window title,
clear the screen, hide text or reverse it (U+202E).

    escape("a\\x1b[2Jb")               -> 'a\\\\x1b[2Jb'
    with escaped_output(): ...         # cli.main: every write to stdout/stderr goes through escape

One choke point: cli.main wraps sys.stdout and sys.stderr in `EscapingStream` for the whole
command, so no renderer has to remember. Newlines and tabs pass; a carriage return passes only
at the very start of a write (the progress lines, `\\ranalysed 3/8 traces`), anywhere else it
could overwrite what came before it on the line and is escaped.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from stallscope.core.untrusted import visible


def escape(text: str) -> str:
    """`text` with every control and invisible-direction character written as \\xNN or \\uNNNN
    (core/untrusted.visible, keeping newlines and tabs)."""
    return visible(text, lines=True)


def escape_write(text: str) -> str:
    """escape(), keeping one leading carriage return (a progress line redrawing itself)."""
    if text.startswith("\r"):
        return "\r" + escape(text[1:])
    return escape(text)


class EscapingStream:
    """A text stream that escapes what is written to it and passes everything else (isatty,
    fileno, flush, encoding, buffer) to the stream it wraps."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(escape_write(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextmanager
def escaped_output() -> Iterator[None]:
    """sys.stdout and sys.stderr escape what is written, until the block ends."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = EscapingStream(sys.stdout), EscapingStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
