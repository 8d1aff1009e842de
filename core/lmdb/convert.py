"""Convert an image folder or a Python factory Dataset into a stallscope LMDB, resumably.

    job = convert("data/train", "data/train.lmdb", preprocess=Preprocess(resize=256))
    result = run_job(job, progress)          # or: python -m stallscope.core.lmdb.convert SRC DST

Decoding runs in a process pool (every core by default); this process is the one writer. Samples
are committed in batches and each batch's transaction also holds the progress marker, so a
conversion interrupted at any point (Ctrl-C, kill -9, power loss) resumes exactly where its last
commit ended: no duplicate and no missing sample. Unreadable samples are skipped and listed.
The LMDB format is described in lmdb_format.py; no pickle is stored.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import lmdb

from stallscope.core.errors import Cancelled, StallscopeError
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.source import (
    Decoder,
    FolderSource,
    Preprocess,
    SampleError,
    Source,
    SourceError,
    lmdb_bytes,
    open_source,
    source_desc,
)

LOCK_NAME = "stallscope.lock"
MIN_MAP_SIZE = 1 << 20


@dataclass
class ConvertResult:
    dst: str
    count: int  # samples in the LMDB
    total: int  # samples in the source
    skipped: list[dict]  # {"source_index", "path", "reason"}, over all runs
    seconds: float  # this run
    converted_now: int  # source samples handled by this run
    resumed_from: int  # source index this run started at
    already_complete: bool = False
    map_growths: int = 0
    bytes_on_disk: int = 0

    @property
    def samples_per_s(self) -> float:
        return self.converted_now / self.seconds if self.seconds > 0 else 0.0


@dataclass
class DestState:
    """What a destination path holds: 'missing', 'empty', 'foreign' or 'ours'."""

    kind: str
    meta: dict | None = None
    progress: dict | None = None
    report: dict | None = None
    reason: str = ""

    @property
    def complete(self) -> bool:
        return bool(self.meta and self.meta.get("complete"))


def destination_state(dst: str | os.PathLike) -> DestState:
    dst = Path(dst).expanduser()
    if not dst.exists():
        return DestState("missing")
    if not dst.is_dir():
        return DestState("foreign", reason="is a file, not a folder")
    if not (dst / "data.mdb").exists():
        others = [p.name for p in dst.iterdir() if p.name not in (LOCK_NAME, "lock.mdb")]
        if others:
            return DestState("foreign", reason="is a folder that is not empty and holds no LMDB")
        return DestState("empty")
    try:
        env = lmdb.open(str(dst), readonly=True, lock=False, subdir=True, max_dbs=0)
    except lmdb.Error as exc:
        if "already open" in str(exc):  # LMDB allows one handle per process
            raise StallscopeError(f"{dst}: is open in this process; close it first") from exc
        return DestState("foreign", reason=f"holds a data.mdb that LMDB cannot open ({exc})")
    try:
        with env.begin() as txn:
            meta, progress, report = (txn.get(k) for k in (fmt.META_KEY, fmt.PROGRESS_KEY,
                                                            fmt.REPORT_KEY))  # fmt: skip
            entries = txn.stat()["entries"]
    finally:
        env.close()
    if meta is None:
        if entries == 0:  # killed before its first commit: nothing to lose
            return DestState("empty")
        return DestState("foreign", reason="holds an LMDB that stallscope did not write")
    try:
        meta = fmt.loads(meta)
    except ValueError:
        return DestState("foreign", reason="holds an LMDB whose metadata is not stallscope's")
    if not isinstance(meta, dict) or meta.get("format") != fmt.FORMAT:
        return DestState("foreign", reason="holds an LMDB that stallscope did not write")
    return DestState(
        "ours",
        meta,
        fmt.loads(progress) if progress else {"next_source": 0, "written": 0},
        fmt.loads(report) if report else None,
    )


def convert(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    *,
    workers: int | None = None,
    preprocess: Preprocess | None = None,
    map_size: int | None = None,
    commit_every: int = 1000,
    commit_bytes: int = 256 << 20,
    commit_seconds: float = 5.0,
    chunk: int | None = None,
    cancel: CancelFlag | None = None,
    mp_context: str | None = None,
) -> Job[ConvertResult]:
    """A job (yields (source samples done, total)) that converts src into the LMDB at dst.

    Resumes when dst holds an unfinished conversion of the same source and options; refuses a
    dst that exists and is not a stallscope LMDB, or that holds a conversion of something else.
    workers=0 decodes in this process.
    """
    t0 = time.perf_counter()
    pre = preprocess or Preprocess()
    source = open_source(src)
    n = len(source)
    if n == 0:
        raise SourceError(f"{source.spec}: the dataset is empty")
    dst = Path(dst).expanduser().resolve()
    structure = _structure(source, pre)
    meta = _new_meta(source, pre, structure)
    state = _check_destination(dst, meta)
    dst.mkdir(parents=True, exist_ok=True)
    lock = _lock(dst)
    progress = state.progress if state.kind == "ours" else {"next_source": 0, "written": 0}
    if state.complete:
        lock.close()
        return _result(dst, meta, t0, 0, progress["next_source"], already_complete=True)
    est = _record_estimate(source, pre)
    if map_size is None:
        map_size = int(n * lmdb_bytes(est) * 1.1) + (8 << 20)
    env = lmdb.open(
        str(dst), map_size=map_size if map_size > 0 else MIN_MAP_SIZE,
        subdir=True, readahead=False, meminit=False, max_dbs=0,
    )  # fmt: skip
    writer = _Writer(env, source, progress)
    if state.kind != "ours":
        writer.commit(meta=meta)  # claims dst before any sample is written
    start = progress["next_source"]
    workers = (os.cpu_count() or 1) if workers is None else max(0, int(workers))
    if chunk is None:  # a few MB per task: enough to amortise IPC, small in /dev/shm
        chunk = min(64, TASK_BYTES // max(est, 1), (n - start) // (max(workers, 1) * 4))
    chunk = max(1, int(chunk))
    pool = _Pool(source, pre, structure, workers, mp_context)
    limits = (commit_every, commit_bytes, commit_seconds)
    try:
        while True:
            try:
                yield from _pump(writer, pool, source, chunk, limits, cancel)
                meta = dict(meta, complete=True, count=writer.cur_written)
                writer.commit(meta=meta, report=_report(writer, meta, t0, start))
                break
            except lmdb.MapFullError:
                writer.grow()  # the uncommitted range is decoded again
    except (Cancelled, GeneratorExit):
        writer.commit_or_abort()  # stopped at a safe point: keep what is decoded
        raise
    finally:
        writer.abort()  # no-op after a commit; after Ctrl-C drops only the uncommitted batch
        pool.close()
        env.close()
        lock.close()
    done = writer.next_source - start
    return _result(dst, meta, t0, done, start, growths=writer.growths)


def _pump(writer, pool, source, chunk: int, limits, cancel) -> Job[None]:
    """Decode in the pool, write in order; yields (source samples done, total)."""
    n = len(source)
    inflight: deque = deque()
    next_task = writer.next_source
    depth = pool.depth
    try:
        while next_task < n or inflight:
            while next_task < n and len(inflight) < depth:
                stop = min(n, next_task + chunk)
                inflight.append(pool.submit(source.task(next_task, stop)))
                next_task = stop
            writer.add(pool.take(inflight.popleft()), pool)
            if writer.due(*limits):
                writer.commit()
            yield writer.cur_source, n
            if cancel is not None:
                cancel.check()
    finally:
        pool.discard(inflight)


def _structure(source: Source, pre: Preprocess) -> dict:
    """Every sample must share sample 0's structure (the first readable one for factories)."""
    if isinstance(source, FolderSource):
        return source.structure
    decoder = Decoder(source_desc(source), pre.to_dict(), None)
    errors = []
    for index in range(min(len(source), 16)):
        try:
            return decoder.sample(index)[1]
        except SampleError as exc:
            errors.append(f"[{index}] {exc}")
    raise SourceError(f"{source.spec}: the first samples cannot be read: {errors[0]}")


def _record_estimate(source: Source, pre: Preprocess) -> int:
    """Mean record size from a few image headers (folders) or decoded samples (factories)."""
    from stallscope.core.lmdb.source import _header_sizes, inspect_source

    if isinstance(source, FolderSource):
        sizes = _header_sizes(source, pre, 16)
        if sizes:
            return int(sum(sizes) / len(sizes))
    return int(inspect_source(source.spec, pre, n_preview=2, n_size=4).bytes_per_sample)


def _new_meta(source: Source, pre: Preprocess, structure: dict) -> dict:
    from stallscope.core.lmdb.source import leaf_names

    fields = source.fields() if isinstance(source, FolderSource) else leaf_names(structure)
    return {
        "format": fmt.FORMAT,
        "version": fmt.VERSION,
        "source": {
            "kind": source.kind,
            "spec": source.spec,
            "count": len(source),
            "fingerprint": source.fingerprint(),
        },
        "preprocess": pre.to_dict(),
        "structure": structure,
        "fields": fields,
        "classes": list(source.classes),
        "complete": False,
        "count": 0,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _check_destination(dst: Path, meta: dict) -> DestState:
    state = destination_state(dst)
    if state.kind == "foreign":
        raise StallscopeError(f"{dst}: {state.reason}; refusing to write there")
    if state.kind != "ours":
        return state
    old = state.meta
    spec = meta["source"]["spec"]
    if old["source"]["spec"] != spec:
        raise StallscopeError(
            f"{dst}: holds a conversion of {old['source']['spec']}, not of {spec}; "
            "choose another destination or delete it"
        )
    if old.get("version") != fmt.VERSION:
        raise StallscopeError(f"{dst}: written by stallscope format {old.get('version')}")
    if old["preprocess"] != meta["preprocess"] or old["structure"] != meta["structure"]:
        raise StallscopeError(
            f"{dst}: holds a conversion of {spec} with other options "
            f"({Preprocess.from_dict(old['preprocess']).describe()}); "
            "use the same options to resume, or another destination"
        )
    if old["source"]["fingerprint"] != meta["source"]["fingerprint"]:
        raise StallscopeError(
            f"{dst}: {spec} changed since this conversion started (files added, removed or "
            "resized); resuming would misnumber samples, so convert into a new destination"
        )
    return state


def _lock(dst: Path):
    handle = open(dst / LOCK_NAME, "a+")  # noqa: SIM115 - held for the whole conversion
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.close()
        raise StallscopeError(f"{dst}: another conversion is writing there right now") from exc
    return handle


def _skip_value(source: Source, index: int, reason: str) -> bytes:
    return fmt.dumps({"source_index": index, "path": source.name_of(index), "reason": reason})


class _Writer:
    """The one writer. Records go straight into an open write transaction; a commit adds the
    progress marker (the last source index written + 1) to that same transaction, so committed
    data and committed progress always agree, whatever stops the process."""

    def __init__(self, env: lmdb.Environment, source: Source, progress: dict) -> None:
        self.env = env
        self.source = source
        self.written = self.cur_written = int(progress["written"])
        self.next_source = self.cur_source = int(progress["next_source"])
        self.txn = None
        self.batch_n = self.batch_bytes = 0
        self.last_commit = time.monotonic()
        self.growths = 0

    def _txn(self):
        if self.txn is None:
            self.txn = self.env.begin(write=True)
        return self.txn

    def add(self, result, pool: _Pool) -> None:
        """One task's result: ('slot', k, entries) in shared memory, or ('inline', records)."""
        txn = self._txn()
        if result[0] == "inline":
            for index, record, reason in result[1]:
                self._put(txn, index, record, reason)
            return
        _, slot, entries = result
        mv = pool.slot_view(slot, max((off + size for _i, off, size, _r in entries), default=0))
        for index, offset, size, reason in entries:
            if reason:
                self._put(txn, index, None, reason)
            else:
                with mv[offset : offset + size] as record:
                    self._put(txn, index, record, "")

    def _put(self, txn, index: int, record, reason: str) -> None:
        if record is None:
            txn.put(fmt.skip_key(index), _skip_value(self.source, index, reason))
        else:
            txn.put(fmt.sample_key(self.cur_written), record, append=True)
            self.cur_written += 1
            self.batch_n += 1
            self.batch_bytes += len(record)
        self.cur_source = index + 1

    def due(self, every: int, nbytes: int, seconds: float) -> bool:
        return (
            self.batch_n >= every
            or self.batch_bytes >= nbytes
            or time.monotonic() - self.last_commit >= seconds
        )

    def commit(self, meta: dict | None = None, report: dict | None = None) -> None:
        txn = self._txn()
        progress = {"next_source": self.cur_source, "written": self.cur_written}
        try:
            txn.put(fmt.PROGRESS_KEY, fmt.dumps(progress))
            if meta is not None:
                txn.put(fmt.META_KEY, fmt.dumps(meta))
            if report is not None:
                txn.put(fmt.REPORT_KEY, fmt.dumps(report))
            txn.commit()
        except lmdb.MapFullError:
            raise
        except lmdb.Error as exc:
            self.abort()
            raise StallscopeError(f"{self.env.path()}: writing failed: {exc}") from exc
        self.txn = None
        self.written, self.next_source = self.cur_written, self.cur_source
        self.batch_n = self.batch_bytes = 0
        self.last_commit = time.monotonic()

    def commit_or_abort(self) -> None:
        try:
            self.commit()
        except lmdb.Error:
            self.abort()

    def abort(self) -> None:
        if self.txn is not None:
            with contextlib.suppress(lmdb.Error):
                self.txn.abort()
            self.txn = None
        self.cur_written, self.cur_source = self.written, self.next_source
        self.batch_n = self.batch_bytes = 0

    def grow(self) -> None:
        self.abort()
        size = self.env.info()["map_size"]
        self.env.set_mapsize(2 * size + (1 << 20))
        self.growths += 1


def _report(writer: _Writer, meta: dict, t0: float, start: int) -> dict:
    return {
        "count": meta["count"],
        "total": meta["source"]["count"],
        "skipped": read_skipped(writer._txn()),
        "seconds_last_run": round(time.perf_counter() - t0, 3),
        "resumed_from": start,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def read_skipped(env_or_txn) -> list[dict]:
    """The skip list, from an environment or inside an open transaction."""
    if isinstance(env_or_txn, lmdb.Environment):
        with env_or_txn.begin() as txn:
            return read_skipped(txn)
    out = []
    with env_or_txn.cursor() as cur:
        if cur.set_range(fmt.SKIP_PREFIX):
            for key, value in cur:
                if not key.startswith(fmt.SKIP_PREFIX):
                    break
                out.append(fmt.loads(value))
    return out


def _result(dst: Path, meta: dict, t0: float, done: int, start: int, *, already_complete=False,
            growths=0) -> ConvertResult:  # fmt: skip
    env = lmdb.open(str(dst), readonly=True, lock=False, subdir=True)
    try:
        skipped = read_skipped(env)
        with env.begin() as txn:
            stored = fmt.loads(txn.get(fmt.META_KEY))
    finally:
        env.close()
    return ConvertResult(
        str(dst), int(stored["count"]), int(meta["source"]["count"]), skipped,
        time.perf_counter() - t0, done, start, already_complete, growths,
        os.path.getsize(dst / "data.mdb"),
    )  # fmt: skip


# ----------------------------------------------------------------------------- decoding pool


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
class _Pool:
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


if __name__ == "__main__":
    from stallscope.core.cli import main

    sys.exit(main(["convert", *sys.argv[1:]]))
