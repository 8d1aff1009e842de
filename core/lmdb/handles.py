"""Opening a stallscope LMDB for reading: one shared read-only handle per file per process, and
the readahead default (LMDBDataset's docstring says why it depends on the memory available).

    env, txn = acquire(path, readahead)   # opened readonly and lock-free, shared by path
    release(path)                         # when the last user in this process lets go
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import lmdb


def default_readahead(path: str) -> bool:
    """On when the LMDB is at most half the memory available now (dataset.py says why)."""
    try:
        data = Path(path) / "data.mdb" if os.path.isdir(path) else Path(path)
        size = data.stat().st_size
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
