"""Convert an image folder or a Python factory Dataset into a stallscope LMDB, resumably.

    job = convert("data/train", "data/train.lmdb", preprocess=Preprocess(resize=256))
    result = run_job(job, progress)          # or: stallscope-cli convert SRC DST

Decoding runs in a process pool (every core by default); this process is the one writer. Samples
are committed in batches and each batch's transaction also holds the progress marker, so a
conversion interrupted at any point (Ctrl-C, kill -9, power loss) resumes exactly where its last
commit ended: no duplicate and no missing sample. Unreadable samples are skipped and listed.
The LMDB format is described in format.py; no pickle is stored. What a destination holds:
destination.py; the decoding pool: pool.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import lmdb

from stallscope.core.errors import Cancelled, StallscopeError
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.destination import LOCK_NAME, DestState, destination_state
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.inspection import header_sizes, inspect_source, lmdb_bytes
from stallscope.core.lmdb.pool import TASK_BYTES, DecodePool
from stallscope.core.lmdb.source import (
    Decoder,
    FolderSource,
    SampleError,
    Source,
    SourceError,
    leaf_names,
    open_source,
    source_desc,
)

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
    pool = DecodePool(source, pre, structure, workers, mp_context)
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
    if isinstance(source, FolderSource):
        sizes = header_sizes(source, pre, 16)
        if sizes:
            return int(sum(sizes) / len(sizes))
    return int(inspect_source(source.spec, pre, n_preview=2, n_size=4).bytes_per_sample)


def _new_meta(source: Source, pre: Preprocess, structure: dict) -> dict:
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

    def add(self, result, pool: DecodePool) -> None:
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
