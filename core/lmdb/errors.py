"""What goes wrong reading a conversion's source: the source as a whole, or one sample."""

from __future__ import annotations

from stallscope.core.errors import StallscopeError


class SourceError(StallscopeError):
    """A conversion source that cannot be opened."""


class SampleError(Exception):
    """One sample that cannot be read; the conversion skips it and lists the reason."""


class SampleExit(StallscopeError):
    """A sample whose __getitem__ tried to end the process: the conversion stops there."""


def one_line(exc: BaseException) -> str:
    """An exception from user code or a decoder as one short line, naming its type."""
    text = " ".join(str(exc).split()) or "no message"
    return f"{type(exc).__name__}: {text}"[:300]
