"""The converter's decoding pool: worker processes decode tasks of samples into LMDB records.

    pool = DecodePool(source, preprocess, structure, workers=4, mp_context=None)
    pending = pool.submit(task); kind_and_records = pool.take(pending)
    pool.close()

workers=0 decodes in this process. Workers die with the converter (PR_SET_PDEATHSIG) and
ignore Ctrl-C (the converter handles it).
"""

from __future__ import annotations

import contextlib
import mmap
import multiprocessing as mp
import os
import signal
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.source import Decoder, Source, SourceError, source_desc

# Decoded records travel from the workers to the writer through a few fixed shared-memory
# slots (files in /dev/shm, one per task in flight, reused): a pipe would cost four extra copies
# and several context switches per image, and fresh segments would cost page allocation and
# zeroing every time. Without /dev/shm, or when it is full, records travel inline (pickled).
SHM_DIR = Path("/dev/shm")
SHM_PREFIX = "stallscope-lmdb-"
TASK_BYTES = 4 << 20  # target decoded bytes per task


class _Done:
    def __init__(self, value) -> None:
        self.value = value

    def get(self, timeout=None):
        return self.value


@dataclass
class DecodePool:
    source: Source
    pre: Preprocess
    structure: dict
    workers: int
    mp_context: str | None
    _pool: object = field(default=None, init=False)
    _local: Decoder | None = field(default=None, init=False)
    _free: deque = field(default_factory=deque, init=False)
    _maps: dict = field(default_factory=dict, init=False)  # slot -> (mmap, view)

    def __post_init__(self) -> None:
        args = (source_desc(self.source), self.pre.to_dict(), self.structure)
        if self.workers == 0:
            self._local = Decoder(*args)
            return
        _remove_stale_shm()
        prefix = ""
        if SHM_DIR.is_dir() and os.access(SHM_DIR, os.W_OK):
            prefix = str(SHM_DIR / f"{SHM_PREFIX}{os.getpid()}-")
            self._free.extend(range(self.depth))
        ctx = mp.get_context(self.mp_context or default_context())
        self._pool = ctx.Pool(self.workers, _init_worker, (os.getpid(), prefix, *args))

    @property
    def depth(self) -> int:
        """Tasks in flight (and /dev/shm slots): enough that decoders never wait on a commit
        (measured on 2 cores: 8 per worker converts ~15% faster than 2), capped for big boxes."""
        return max(2, min(8 * self.workers, self.workers + 24))

    def submit(self, task):
        if self._local is not None:
            return _Done((None, ("inline", self._local.records(task))))
        slot = self._free.popleft() if self._free else -1
        return slot, self._pool.apply_async(_decode_task, (slot, task))

    def take(self, pending):
        """The result of a submitted task; its slot is free again once the writer is done,
        which is before the next submit (the writer runs in this thread)."""
        if isinstance(pending, _Done):
            return pending.get()[1]
        slot, async_result = pending
        if slot >= 0:
            self._free.append(slot)
        return async_result.get()

    def slot_view(self, slot: int, needed: int) -> memoryview:
        mapped = self._maps.get(slot)
        if mapped is None or len(mapped[1]) < needed:  # a worker grew the slot file
            if mapped is not None:
                mapped[1].release()
                mapped[0].close()
            path = SHM_DIR / f"{SHM_PREFIX}{os.getpid()}-{slot}"
            fd = os.open(path, os.O_RDONLY)
            try:
                m = mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_SHARED, mmap.PROT_READ)
            finally:
                os.close(fd)
            mapped = self._maps[slot] = (m, memoryview(m))
        return mapped[1]

    def discard(self, inflight) -> None:
        """Results that will not be written (after a map growth, or when stopping)."""
        while inflight:
            pending = inflight.popleft()
            with contextlib.suppress(Exception):
                if isinstance(pending, _Done):
                    continue
                slot, async_result = pending
                if slot >= 0:
                    self._free.append(slot)
                async_result.get(timeout=60)

    def close(self) -> None:
        for m, view in self._maps.values():
            view.release()
            m.close()
        self._maps.clear()
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            for path in SHM_DIR.glob(f"{SHM_PREFIX}{os.getpid()}-*"):
                path.unlink(missing_ok=True)


def _remove_stale_shm() -> None:
    """Slots left by a converter that was killed (its workers die with it)."""
    if not SHM_DIR.is_dir():
        return
    for path in SHM_DIR.glob(f"{SHM_PREFIX}*-*"):
        try:
            os.kill(int(path.name[len(SHM_PREFIX) :].split("-")[0]), 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
        except (ValueError, OSError):
            continue


def default_context() -> str:
    """fork is quickest, but only safe from a single-threaded process (not from the GUI)."""
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return "fork"
    return "spawn"


_DECODER: Decoder | None = None
_INIT_ERROR: str | None = None
_SLOT_PREFIX = ""
_SLOTS: dict[int, tuple[mmap.mmap, int]] = {}


def _init_worker(parent_pid: int, prefix: str, desc: dict, pre: dict, structure: dict) -> None:
    global _DECODER, _INIT_ERROR, _SLOT_PREFIX
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    _SLOT_PREFIX = prefix
    _SLOTS.clear()  # a forked worker must not share its parent's mappings' bookkeeping
    try:
        _DECODER = Decoder(desc, pre, structure)
    except Exception as exc:  # noqa: BLE001 - reported by the first task, not by a respawn loop
        _INIT_ERROR = str(exc)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _decode_task(slot: int, task: list):
    if _DECODER is None:
        raise SourceError(_INIT_ERROR or "decoder did not start")
    decoded = _DECODER.decode(task)
    total = sum(planned[2] for _i, planned, _r in decoded if planned is not None)
    if total and slot >= 0 and _SLOT_PREFIX:
        try:
            return ("slot", slot, _write_slot(slot, total, decoded))
        except OSError:
            pass  # /dev/shm full: send this task inline
    records = []
    for index, planned, reason in decoded:
        record = None
        if planned is not None:
            header, offsets, size, arrays = planned
            record = bytearray(size)
            fmt.write(memoryview(record), 0, header, offsets, arrays)
        records.append((index, record, reason))
    return ("inline", records)


def _write_slot(slot: int, total: int, decoded) -> list:
    m, size = _SLOTS.get(slot, (None, 0))
    if m is None or size < total:
        fd = os.open(f"{_SLOT_PREFIX}{slot}", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            size = max(os.fstat(fd).st_size, total)
            if size > os.fstat(fd).st_size:
                size = max(total, size + size // 2)
                os.posix_fallocate(fd, 0, size)  # ENOSPC now, not SIGBUS while writing
            if m is not None:
                m.close()
            m = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        _SLOTS[slot] = (m, size)
    entries, pos = [], 0
    with memoryview(m) as mv:
        for index, planned, reason in decoded:
            if planned is None:
                entries.append((index, 0, 0, reason))
                continue
            header, offsets, size_, arrays = planned
            fmt.write(mv, pos, header, offsets, arrays)
            entries.append((index, pos, size_, ""))
            pos += size_
    return entries


def _die_with_parent(parent_pid: int) -> None:
    """A killed converter must not leave decoding workers behind."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:
        os._exit(1)
