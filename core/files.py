"""Files read only when they are regular files, and only up to a cap: a `lineprof/x.json` that
is a symlink to /dev/zero, a FIFO, or a `file` field naming one, is refused by its kind, never
opened for a blocking read. The trace reader (core/readers/source.py) names kinds the same way.

    data = read_regular(path, cap=16 << 20, inside=session)   # bytes, or raises Refused
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from stallscope.core.units import mib

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"))


class Refused(Exception):
    """Why a file was not read (the message does not repeat the path)."""


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, for a message: "a FIFO", "a folder"..."""
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return "not a regular file"


def read_regular(path: str | os.PathLike, cap: int,
                 inside: str | os.PathLike | None = None) -> bytes:
    """The file's bytes when it is a regular file of at most `cap` bytes (and, with `inside`,
    when it resolves to a place under that folder)."""
    p = Path(path)
    if inside is not None:
        real, root = os.path.realpath(p), os.path.realpath(inside)
        if os.path.commonpath([real, root]) != root:
            raise Refused(f"points outside its folder ({real}), not read")
    try:  # O_NONBLOCK: a FIFO opens at once instead of waiting for a writer
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise Refused("not found") from None
    except OSError as exc:
        raise Refused(f"cannot read: {exc.strerror or exc}") from None
    with open(fd, "rb", buffering=0) as f:
        st = os.fstat(fd)  # the file opened, not whatever the name points at now
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"is {kind_of(st.st_mode)}, not a regular file")
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
