"""Opening a stallscope LMDB for reading: one shared read-only handle per file per process, and
the readahead default (LMDBDataset's docstring says why it depends on the memory available).

    env, txn = acquire(path, readahead)   # opened readonly and lock-free, shared by path
    release(path)                         # when the last user in this process lets go
    check_length(path)                    # before opening an LMDB stallscope did not just create

LMDB maps data.mdb, so reading a page past the file's end (a copy cut short) is a SIGBUS that
kills the process with nothing said. check_length compares the file with what its own meta
pages say it holds first (acquire and every other opening in core/lmdb call it).
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
from pathlib import Path

import lmdb

from stallscope.core import units
from stallscope.core.errors import StallscopeError


class TruncatedError(StallscopeError):
    """data.mdb is shorter than its meta pages say: reading it would crash (SIGBUS)."""


# LMDB's data.mdb starts with two meta pages (page 0 and 1), each an MDB_page header (16 bytes
# on 64-bit) then an MDB_meta (lmdb's mdb.c): uint32 mm_magic, uint32 mm_version,
# void *mm_address, size_t mm_mapsize, MDB_db mm_dbs[2] (48 bytes each; the page size is
# mm_dbs[0].md_pad), pgno_t mm_last_pg, txnid_t mm_txnid. A commit writes the older meta page.
MDB_MAGIC = 0xBEEFC0DE
_MAGIC_AT, _PSIZE_AT, _LAST_PG_AT = 16, 40, 136  # _LAST_PG_AT + 8: mm_txnid
# Pages at the file's end that a commit freed again before writing them ("loose" pages) are
# never written: mdb.c says the file "may be shorter if the freeDB lists the final pages". A
# shortfall of a few whole pages is that; a copy cut short is rarely a whole number of pages.
LOOSE_PAGES = 8


def data_file(path: str | os.PathLike) -> Path:
    """The data.mdb of an LMDB folder (or the file itself, an LMDB opened with subdir=False)."""
    return Path(path) / "data.mdb" if os.path.isdir(path) else Path(path)


def needed_length(head: bytes) -> tuple[int, int] | None:
    """(bytes the newest meta page says the file holds, page size) from the file's first two
    pages; None when neither is an LMDB meta page this check can read."""
    if sys.maxsize < 2**32:  # 32-bit: another MDB_meta layout; LMDB checks its own file
        return None
    psize = 4096  # LMDB's page size on Linux (the OS page size) when page 0 does not say
    if len(head) >= _PSIZE_AT + 4 and struct.unpack_from("=I", head, _MAGIC_AT)[0] == MDB_MAGIC:
        stored = struct.unpack_from("=I", head, _PSIZE_AT)[0]
        if 512 <= stored <= 65536 and stored & (stored - 1) == 0:
            psize = stored
    newest: tuple[int, int] | None = None  # (txnid, last_pg)
    for page in (0, 1):
        at = page * psize
        if len(head) < at + _LAST_PG_AT + 16:
            continue
        if struct.unpack_from("=I", head, at + _MAGIC_AT)[0] != MDB_MAGIC:
            continue
        last_pg, txnid = struct.unpack_from("=QQ", head, at + _LAST_PG_AT)
        if newest is None or txnid > newest[0]:
            newest = (txnid, last_pg)
    if newest is None or newest[1] >= 1 << 40:  # no meta page, or one that is not LMDB's
        return None
    return (newest[1] + 1) * psize, psize


def check_length(path: str | os.PathLike) -> None:
    """TruncatedError (one line: the file, its size, the size its meta pages need) when the
    LMDB at path is shorter than its meta pages say. Files LMDB cannot read as an LMDB at
    all (no meta page) are left to LMDB's own error."""
    data = data_file(path)
    try:
        with open(data, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(2 * 65536)
    except OSError:
        return  # opening it says why
    need = needed_length(head)
    if need is None:
        return
    needed, psize = need
    if size >= needed or (size % psize == 0 and needed - size <= LOOSE_PAGES * psize):
        return
    raise TruncatedError(f"{data} is truncated: {units.size(size)} of the {units.size(needed)} "
                         f"its meta pages need ({size:,} of {needed:,} bytes; a copy cut short?)")


def default_readahead(path: str) -> bool:
    """On when the LMDB is at most half the memory available now (dataset.py says why)."""
    try:
        size = data_file(path).stat().st_size
    except OSError:
        return True
    avail = _mem_available()
    return avail is None or size <= avail // 2


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


# LMDB allows one handle per file per process, so readers of the same path share one, opened
# readonly and lock-free, with one long read transaction (the data never changes under it).
_SHARED: dict[str, list] = {}  # realpath -> [pid, env, txn, users]


def acquire(path: str,
            readahead: bool) -> tuple[lmdb.Environment, lmdb.Transaction[memoryview]]:
    key = os.path.realpath(path)
    entry = _SHARED.get(key)
    if entry is not None and entry[0] != os.getpid():
        stale = list(_SHARED.values())  # handles inherited through fork belong to the parent
        _SHARED.clear()
        for _pid, env, txn, _users in stale:
            with contextlib.suppress(lmdb.Error):
                txn.abort()
                env.close()  # in the child only: the parent's handle stays open
        entry = None
    if entry is None:
        check_length(path)
        env = lmdb.open(
            path, readonly=True, lock=False, readahead=readahead, meminit=False,
            subdir=os.path.isdir(path), max_readers=2048,
        )  # fmt: skip
        entry = _SHARED[key] = [os.getpid(), env, env.begin(buffers=True), 0]
    entry[3] += 1
    return entry[1], entry[2]


def release(path: str) -> None:
    key = os.path.realpath(path)
    entry = _SHARED.get(key)
    if entry is None or entry[0] != os.getpid():
        return
    entry[3] -= 1
    if entry[3] <= 0:
        del _SHARED[key]
        entry[2].abort()
        entry[1].close()
