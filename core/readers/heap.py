"""Freed memory reused while a trace loads, not handed back to the kernel and faulted in again.

glibc serves a block over its mmap threshold (128 KiB at first, sliding up to 32 MiB) by mmap and
gives it back to the kernel when it is freed. Loading a 1 GB trace frees its 1 GB of text right
before the columns are packed, and each piece's temporaries after the piece: every page of the
next arrays was then a fresh page fault (0.45 s of system time in `finish` alone, 0.55 s of
2.0 s in all at 1 GB, measured by tests/bench/bench_load.py --phases). While a trace loads, blocks
up to 2 GiB come from the heap, whose freed pages the next arrays reuse; afterwards the
threshold is glibc's own ceiling, 32 MiB. Peak memory is what it was (the same blocks, from
another place); the heap's top is still trimmed by free() as before. In a long-lived process
(the app) whose heap has holes the text may land at the heap's top and be trimmed as before: no
gain there, no loss. Elsewhere than glibc (macOS, musl, Windows) this does nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_M_MMAP_THRESHOLD = -3           # mallopt's parameter number (malloc.h)
_WHILE_LOADING = 2**31 - 1       # mallopt takes an int
_AFTER = 32 << 20                # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: where glibc's slides to
_libc: Any = None  # mallopt, False where there is none, None until looked for


def _glibc() -> Callable[[int, int], int] | None:
    """The C library's mallopt, on glibc only (None elsewhere, or when it cannot be reached)."""
    global _libc
    if _libc is None:
        _libc = False
        try:
            if os.confstr("CS_GNU_LIBC_VERSION"):
                import ctypes

                mallopt = ctypes.CDLL(None).mallopt
                mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                mallopt.restype = ctypes.c_int
                _libc = mallopt
        except (AttributeError, OSError, TypeError, ValueError):
            pass
    return _libc or None


@contextmanager
def reusing_freed_memory() -> Iterator[None]:
    mallopt = _glibc()
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, _WHILE_LOADING)
    try:
        yield
    finally:
        if mallopt is not None:
            mallopt(_M_MMAP_THRESHOLD, _AFTER)
