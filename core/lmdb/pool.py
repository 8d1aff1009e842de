"""The converter's decoding pool: worker processes decode tasks of samples into LMDB records.

    pool = DecodePool(source, preprocess, structure, workers=4, mp_context=None)
    pending = pool.submit(task); kind_and_records = pool.take(pending)
    pool.close()

workers=0 decodes in this process. Workers die with the converter (PR_SET_PDEATHSIG) and
ignore Ctrl-C (the converter handles it). Workers pull tasks from one queue and answer on their
own pipe; the parent waits on those pipes and on each worker's exit at once, so a worker that
dies (a `__getitem__` calling os._exit, a crash in a decoder, the OOM killer) ends the run with
one line naming the sample it was on (each worker posts its current task and sample in shared
memory) instead of a wait that never ends. The run ends when the parent reaches the dead worker's
task, so the tasks before it, still decoded by the others, are written first.
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
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from stallscope.core.errors import StallscopeError
from stallscope.core.lmdb.decoder import Decoder, Encoded, encode, source_desc
from stallscope.core.lmdb.errors import SourceError
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.source import Source

# Decoded records travel from the workers to the writer through a few fixed shared-memory
# slots (files in /dev/shm, one per task in flight, reused): a pipe would cost four extra copies
# and several context switches per image, and fresh segments would cost page allocation and
# zeroing every time. Without /dev/shm, or when it is full, records travel inline (pickled).
SHM_DIR = Path("/dev/shm")
SHM_PREFIX = "stallscope-lmdb-"
TASK_BYTES = 4 << 20  # target decoded bytes per task


class WorkerDied(StallscopeError):
    """A decoding process ended while it was decoding a sample."""


class _Local:
    """A task for workers=0: decoded when it is taken, so everything before it is written
    (and can be committed) before this process decodes it."""

    def __init__(self, task) -> None:
        self.task = task


@dataclass
class DecodePool:
    source: Source
    pre: Preprocess
    structure: dict
    workers: int
    mp_context: str | None
    _local: Decoder | None = field(default=None, init=False)
    _free: deque = field(default_factory=deque, init=False)
    _maps: dict = field(default_factory=dict, init=False)  # slot -> (mmap, view)
    _procs: list = field(default_factory=list, init=False)
    _conns: list = field(default_factory=list, init=False)
    _tasks: object = field(default=None, init=False)
    # per worker, in shared memory: the sample being decoded and the task (seq) it belongs to
    _current: Any = field(default=None, init=False)
    _holding: Any = field(default=None, init=False)
    _results: dict = field(default_factory=dict, init=False)  # seq -> answer, out of order
    _seq: int = field(default=0, init=False)

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
        self._tasks = ctx.SimpleQueue()
        self._current = ctx.RawArray("q", self.workers)
        self._holding = ctx.RawArray("q", self.workers)
        shared = (self._tasks, self._current, self._holding)
        for w in range(self.workers):
            self._current[w] = self._holding[w] = -1
            reader, writer = ctx.Pipe(duplex=False)
            proc = ctx.Process(  # type: ignore[attr-defined]  # typeshed: only on concrete contexts
                target=_worker_main, daemon=True, name=f"stallscope-decoder-{w}",
                args=(os.getpid(), prefix, args, writer, *shared, w),
            )  # fmt: skip
            proc.start()
            writer.close()
            self._procs.append(proc)
            self._conns.append(reader)

    @property
    def depth(self) -> int:
        """Tasks in flight (and /dev/shm slots): enough that decoders never wait on a commit
        (measured on 2 cores: 8 per worker converts ~15% faster than 2), capped for big boxes.
        Not more: tasks travel in one pipe and answers in another, and a parent blocked on a
        full task pipe while a worker is blocked on a full answer pipe would wait forever."""
        return max(2, min(8 * self.workers, self.workers + 24))

    def submit(self, task):
        if self._local is not None:
            return _Local(task)
        slot = self._free.popleft() if self._free else -1
        seq = self._seq
        self._seq += 1
        self._tasks.put((seq, slot, task))
        return seq, slot

    def take(self, pending, timeout: float | None = None):
        """The result of a submitted task; its slot is free again once the writer is done,
        which is before the next submit (the writer runs in this thread)."""
        if isinstance(pending, _Local):
            assert self._local is not None  # workers=0 made it
            return encode(self._local.decode(pending.task), _inline)
        seq, slot = pending
        answer = self._wait_for(seq, timeout)
        if slot >= 0:
            self._free.append(slot)
        kind, value = answer
        if kind == "error":
            raise StallscopeError(value)
        return value

    def _wait_for(self, seq: int, timeout: float | None):
        while seq not in self._results:
            conns = [c for c in self._conns if c is not None]
            live = [p.sentinel for p in self._procs if p.exitcode is None]
            ready = wait(conns + live, timeout)
            if not ready:
                raise TimeoutError
            for c in conns:
                if c in ready:
                    try:
                        done_seq, answer = c.recv()
                    except (EOFError, OSError):
                        self._conns[self._conns.index(c)] = None
                        continue
                    self._results[done_seq] = answer
            if seq not in self._results:
                self._check_deaths(seq)
        return self._results.pop(seq)

    def _check_deaths(self, seq: int) -> None:
        """Raise when the awaited task died with its worker, when a worker died between tasks
        (a task it had just taken may be lost with it), or when no worker is left. A worker that
        died on a later task is reported when the parent reaches that task."""
        dead = [w for w, proc in enumerate(self._procs) if proc.exitcode is not None]
        for w in dead:
            if self._holding[w] in (seq, -1):
                self._raise_died(w)
        if dead and len(dead) == len(self._procs):
            self._raise_died(dead[0])

    def _raise_died(self, w: int) -> None:
        code = self._procs[w].exitcode
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        index = self._current[w]
        if index >= 0:
            raise WorkerDied(
                f"sample {index} ({self.source.name_of(index)}) ended its decoding process "
                f"({how}): its __getitem__ must not exit the process; the samples before "
                "it are kept, fix it (or remove the sample) and run the same command to resume"
            )
        raise WorkerDied(f"a decoding process ended ({how}) before taking a task")

    def discard(self, inflight) -> None:
        """Results that will not be written (after a map growth, or when stopping): waited for,
        so no worker still writes into a slot that is handed out again."""
        while inflight:
            pending = inflight.popleft()
            if isinstance(pending, _Local):
                continue
            with contextlib.suppress(Exception):
                self.take(pending, timeout=60)

    def close(self) -> None:
        for m, view in self._maps.values():
            view.release()
            m.close()
        self._maps.clear()
        if self._procs:
            for proc in self._procs:
                proc.kill()
            for proc in self._procs:
                proc.join(5)
            for c in self._conns:
                if c is not None:
                    c.close()
            self._procs.clear()
            for path in SHM_DIR.glob(f"{SHM_PREFIX}{os.getpid()}-*"):
                path.unlink(missing_ok=True)

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


def _worker_main(
    parent_pid: int, prefix: str, args: tuple, conn, tasks, current, holding, w: int
) -> None:
    global _DECODER, _INIT_ERROR, _SLOT_PREFIX
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    _SLOT_PREFIX = prefix
    _SLOTS.clear()  # a forked worker must not share its parent's mappings' bookkeeping
    try:
        _DECODER = Decoder(*args)
    except Exception as exc:  # noqa: BLE001 - reported by the first task
        _INIT_ERROR = str(exc)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    while True:
        item = tasks.get()
        if item is None:
            return
        seq, slot, task = item
        holding[w] = seq
        answer: tuple[str, Encoded | str]
        try:
            answer = ("ok", _decode_task(slot, task, current, w))
        except Exception as exc:  # noqa: BLE001 - one line to the parent, not a traceback
            answer = ("error", str(exc))
        current[w] = -1
        conn.send((seq, answer))
        holding[w] = -1


def _decode_task(slot: int, task: list, current=None, w: int = 0) -> Encoded:
    if _DECODER is None:
        raise SourceError(_INIT_ERROR or "decoder did not start")
    decoded = _DECODER.decode(task, current, w)
    if slot >= 0 and _SLOT_PREFIX:
        try:
            return encode(decoded, lambda nbytes: (_slot(slot, nbytes), slot))
        except OSError:
            pass  # /dev/shm full: send this task inline
    return encode(decoded, _inline)


def _inline(nbytes: int) -> tuple[memoryview, None]:
    return memoryview(bytearray(nbytes)), None


def _slot(slot: int, total: int) -> memoryview:
    """A writable view of this worker's mapping of slot file `slot`, grown to total bytes."""
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
    return memoryview(m)


def _die_with_parent(parent_pid: int) -> None:
    """A killed converter must not leave decoding workers behind."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:
        os._exit(1)
