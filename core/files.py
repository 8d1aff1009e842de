"""Files read only when they are regular files, and only up to a cap: a `lineprof/x.json` that
is a symlink to /dev/zero, a FIFO, or a `file` field naming one, is refused by its kind, never
opened for a blocking read. The trace reader (core/readers/source.py) names kinds the same way.

    data = read_regular(path, cap=16 << 20, inside=session)   # bytes, or raises Refused
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from stallscope.core.units import mib

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"))


class Refused(Exception):
    """Why a file was not read (the message does not repeat the path). `missing`: the name is
    not there; `kind`: what it is when it is not a regular file ("a FIFO")."""

    def __init__(self, message: str, *, missing: bool = False, kind: str | None = None) -> None:
        super().__init__(message)
        self.missing, self.kind = missing, kind


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, for a message: "a FIFO", "a folder"..."""
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return "not a regular file"


def open_regular(path: str | os.PathLike) -> tuple[BinaryIO, os.stat_result]:
    """The file opened for reading and the stat of what was opened, when it is a regular file
    (O_NONBLOCK: a FIFO opens at once instead of waiting for a writer; fstat: a name swapped
    after a check changes nothing). The caller closes it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise Refused("not found", missing=True) from None
    except OSError as exc:
        raise Refused(f"cannot read: {exc.strerror or exc}") from None
    f = open(fd, "rb", buffering=0)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        f.close()
        kind = kind_of(st.st_mode)
        raise Refused(f"is {kind}, not a regular file", kind=kind)
    return f, st


def read_regular(path: str | os.PathLike, cap: int,
                 inside: str | os.PathLike | None = None) -> bytes:
    """The file's bytes when it is a regular file of at most `cap` bytes (and, with `inside`,
    when it resolves to a place under that folder)."""
    p = Path(path)
    if inside is not None:
        real, root = os.path.realpath(p), os.path.realpath(inside)
        if os.path.commonpath([real, root]) != root:
            raise Refused(f"points outside its folder ({real}), not read")
    f, st = open_regular(p)
    with f:
        if st.st_size > cap:
            raise Refused(f"{mib(st.st_size)}, larger than the {mib(cap)} read of such a file")
        data = bytearray()
        try:
            while len(data) <= cap and (chunk := f.read(cap + 1 - len(data))):
                data += chunk
        except OSError as exc:
            raise Refused(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > cap:
        raise Refused(f"grew past the {mib(cap)} read of such a file")
    return bytes(data)
