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
import shutil
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import lmdb

from stallscope.core.errors import Cancelled, StallscopeError
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.destination import LOCK_NAME, DestState, destination_state
from stallscope.core.lmdb.fields import stored_fields
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.inspection import (
    header_shapes,
    inspect_source,
    lmdb_bytes,
    record_of,
    survey,
)
from stallscope.core.lmdb.listing import listing_blocks, read_listing
from stallscope.core.lmdb.pool import TASK_BYTES, DecodePool
from stallscope.core.lmdb.source import (
    Decoder,
    FactorySource,
    FolderSource,
    SampleError,
    Source,
    SourceError,
    folder_from_listing,
    leaf_names,
    open_source_job,
    source_desc,
)

MIN_MAP_SIZE = 1 << 20
MiB = 1 << 20


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
    fields: list[dict] = field(default_factory=list)  # stored_fields(): name, dtype, shape
    scan_skipped: list[dict] = field(default_factory=list)  # {"path", "reason"}: not samples
    survey: dict = field(default_factory=dict)  # inspection.survey(): shapes seen

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
    """A job (yields (source samples done, total); (files found, 0) while a folder is scanned)
    that converts src (a spec, or a source inspect_source opened: no second scan) into the
    LMDB at dst.

    Resumes when dst holds an unfinished conversion of the same source and options (from the
    listing stored there: the folder is not scanned again); refuses a dst that exists and is
    not a stallscope LMDB, or that holds a conversion of something else. workers=0 decodes in
    this process. Every OS error (read-only or full disk, ...) is one StallscopeError line.
    """
    t0 = time.perf_counter()
    pre = preprocess or Preprocess()
    dst = Path(dst).expanduser().resolve()
    state = _state(dst)
    opened = src if isinstance(src, FolderSource | FactorySource) else None
    source = _stored_source(dst, state, opened.spec if opened else src)
    if source is None:
        source = opened or (yield from open_source_job(src))
    n = len(source)
    if n == 0:
        raise SourceError(f"{source.spec}: the dataset is empty")
    if state.kind == "ours" and state.complete and _same_source(state.meta, source.spec):
        _check_destination(dst, state, _new_meta(source, pre, state.meta["structure"], 1, []))
        return _result(dst, state.meta, t0, 0, state.progress["next_source"],
                       already_complete=True)  # fmt: skip
    structure, first, shapes = _structure(source, pre)
    est = _record_estimate(source, pre, shapes)
    chunk_n = state.meta.get("chunk", 1) if state.kind == "ours" else fmt.chunk_for(est)
    meta = _new_meta(source, pre, structure, chunk_n, first)
    meta["survey"] = survey(shapes)
    if isinstance(source, FolderSource):  # shapes from the survey: no image decoded here
        one = shapes[0] if len(set(shapes)) == 1 else None
        for f in meta["stored"]:
            f["shape"] = [] if f["kind"] == "int" else (list(one) if one else None)
    _check_destination(dst, state, meta)
    if state.kind == "ours":  # what the first run's scan found stays with the LMDB
        for key in ("created", "scan_skipped", "scan_skipped_count"):
            if key in state.meta:
                meta[key] = state.meta[key]
    progress = state.progress if state.kind == "ours" else {"next_source": 0, "written": 0}
    start = progress["next_source"]
    needed = int((n - start) * lmdb_bytes(est)) + (1 << 20)
    _check_space(dst, needed)
    with _os_errors(dst, needed):
        dst.mkdir(parents=True, exist_ok=True)
        lock = _lock(dst)
    try:
        if map_size is None:
            map_size = int(n * lmdb_bytes(est) * 1.1) + (8 << 20)
        with _os_errors(dst, needed):
            env = lmdb.open(
                str(dst), map_size=map_size if map_size > 0 else MIN_MAP_SIZE,
                subdir=True, readahead=False, meminit=False, max_dbs=0,
            )  # fmt: skip
    except BaseException:
        lock.close()
        raise
    writer = _Writer(env, source, progress, chunk_n, needed)
    pool = None
    try:
        if state.kind != "ours":
            writer.commit(meta=meta, extra=_listing_items(source))  # claims dst first
        workers = (os.cpu_count() or 1) if workers is None else max(0, int(workers))
        if chunk is None:  # a few MB per task: enough to amortise IPC, small in /dev/shm
            chunk = min(64, TASK_BYTES // max(est, 1), (n - start) // (max(workers, 1) * 4))
        chunk = max(1, int(chunk))
        try:
            pool = DecodePool(source, pre, structure, workers, mp_context)
        except OSError as exc:
            raise StallscopeError(f"cannot start the decoding processes ({exc}); try "
                                  "--workers 0") from exc
        limits = (commit_every, commit_bytes, commit_seconds)
        while True:
            try:
                yield from _pump(writer, pool, source, chunk, limits, cancel)
                meta = dict(meta, complete=True, count=writer.cur_written)
                writer.commit(meta=meta, report=_report(writer, meta, t0, start))
                break
            except lmdb.MapFullError:
                writer.grow()  # the uncommitted range is decoded again
    except (Cancelled, GeneratorExit, StallscopeError):
        writer.commit_or_abort()  # stopped at a safe point: keep what is decoded
        raise
    finally:
        writer.abort()  # no-op after a commit; after Ctrl-C drops only the uncommitted batch
        if pool is not None:
            pool.close()
        env.close()
        lock.close()
    done = writer.next_source - start
    return _result(dst, meta, t0, done, start, growths=writer.growths)


def _state(dst: Path) -> DestState:
    state = destination_state(dst)
    if state.kind == "foreign":
        raise StallscopeError(f"{dst}: {state.reason}; refusing to write there")
    return state


def _same_source(meta: dict, spec) -> bool:
    return meta["source"]["spec"] == str(spec)


def _stored_source(dst: Path, state: DestState, src) -> Source | None:
    """The folder source a previous run of this conversion scanned, from its stored listing
    (None: scan it, a factory, or another source)."""
    if state.kind != "ours" or state.meta.get("version") != fmt.VERSION:
        return None
    meta = state.meta
    if meta["source"]["kind"] != "folder" or "listing" not in meta:
        return None
    if meta["source"]["spec"] != str(Path(src).expanduser().resolve()):
        return None
    env = lmdb.open(str(dst), readonly=True, lock=False, subdir=True)
    try:
        with env.begin() as txn:
            listing = read_listing(txn, int(meta["listing"]))
    except fmt.FormatError as exc:
        raise StallscopeError(f"{dst}: {exc}; convert into a new destination") from exc
    finally:
        env.close()
    return folder_from_listing(meta["source"]["spec"], meta["classes"], listing)


def _listing_items(source: Source) -> list:
    if not isinstance(source, FolderSource):
        return []
    return list(listing_blocks(*source.listing()))


@contextlib.contextmanager
def _os_errors(dst: Path, needed: int):
    """An OSError or LMDB error as one line naming dst (a full disk says how much it needs)."""
    try:
        yield
    except (OSError, lmdb.Error) as exc:
        if isinstance(exc, lmdb.MapFullError):
            raise
        raise StallscopeError(_os_message(dst, needed, exc)) from exc


def _os_message(dst: Path, needed: int, exc: BaseException) -> str:
    free = _free_bytes(dst)
    text = " ".join(str(exc).split())
    if "No space" in text or "ENOSPC" in text or (free is not None and free < 4 * MiB):
        return f"{dst}: disk full, {_mib(needed)} MiB needed, {_mib(free or 0)} free"
    if isinstance(exc, PermissionError) or "Permission denied" in text or "Read-only" in text:
        return f"{dst}: cannot write there ({text})"
    return f"{dst}: writing failed ({text})"


def _free_bytes(dst: Path) -> int | None:
    probe = dst
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def _check_space(dst: Path, needed: int) -> None:
    free = _free_bytes(dst)
    if free is not None and needed > free:
        raise StallscopeError(f"{dst}: disk full, {_mib(needed)} MiB needed, {_mib(free)} free")


def _mib(n: int) -> str:
    return f"{n / MiB:,.1f}" if n < 100 * MiB else f"{n / MiB:,.0f}"


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


PROBE = 8  # readable samples that settle the structure (and which floats are k/255)


def _structure(source: Source, pre: Preprocess) -> tuple[dict, list, list]:
    """(structure, sample 0's leaves, shapes surveyed). Every sample must share the structure;
    for a factory it is settled on the first few readable samples (a float field is stored as
    uint8 only when all of them are on k/255 steps). Folders: image shapes from 48 headers
    spread over the folder."""
    if isinstance(source, FolderSource):
        return source.structure, [], [shape for shape, _ in header_shapes(source, pre, 48)]
    decoder = Decoder(source_desc(source), pre.to_dict(), None)
    errors: list[str] = []
    found: list[tuple[dict, list]] = []
    for index in range(min(len(source), 2 * PROBE)):
        try:
            _, st, leaves = decoder.sample(index)
            assert st is not None  # a factory's sample carries its own structure
            found.append((st, leaves))
        except SampleError as exc:
            errors.append(f"[{index}] {exc}")
        if len(found) >= PROBE:
            break
    if not found:
        raise SourceError(f"{source.spec}: the first samples cannot be read: {errors[0]}")
    structure = found[0][0]
    for other, _leaves in found[1:]:
        structure = _common(structure, other)
    return structure, found[0][1], [tuple(leaves[0][2].shape) for _s, leaves in found if leaves]


def _common(a: dict, b: dict) -> dict:
    """a, keeping a float leaf's uint8 storage only where b has it too."""
    if a.get("type") != b.get("type") or len(a.get("items", ())) != len(b.get("items", ())):
        return a  # a different structure: that sample is refused when it is converted
    if a["type"] == "leaf":
        return a if "quant" in b or "quant" not in a else {k: v for k, v in a.items()
                                                          if k != "quant"}  # fmt: skip
    items = [_common(x, y) for x, y in zip(a["items"], b["items"], strict=True)]
    return dict(a, items=items)


def _record_estimate(source: Source, pre: Preprocess, shapes: list) -> int:
    """Mean record size from the surveyed image headers (folders) or a few decoded samples."""
    if isinstance(source, FolderSource):
        sizes = [record_of(shape, source.labels is not None) for shape in shapes]
        if sizes:
            return int(sum(sizes) / len(sizes))
    return int(inspect_source(source, pre, n_preview=2, n_size=4).bytes_per_sample)


def _new_meta(source: Source, pre: Preprocess, structure: dict, chunk: int, first) -> dict:
    fields = source.fields() if isinstance(source, FolderSource) else leaf_names(structure)
    meta = {
        "format": fmt.FORMAT,
        "version": fmt.VERSION,
        "chunk": chunk,
        "source": {
            "kind": source.kind,
            "spec": source.spec,
            "count": len(source),
            "fingerprint": source.fingerprint(),
        },
        "preprocess": pre.to_dict(),
        "structure": structure,
        "fields": fields,
        "stored": stored_fields(structure, fields, first),
        "classes": list(source.classes),
        "complete": False,
        "count": 0,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if isinstance(source, FolderSource):
        meta["listing"] = len(source)
        meta["scan_skipped"] = source.scan_skipped[:1000]
        meta["scan_skipped_count"] = len(source.scan_skipped)
    return meta


def _check_destination(dst: Path, state: DestState, meta: dict) -> None:
    if state.kind != "ours":
        return
    old = state.meta
    spec = meta["source"]["spec"]
    if old["source"]["spec"] != spec:
        raise StallscopeError(
            f"{dst}: holds a conversion of {old['source']['spec']}, not of {spec}; "
            "choose another destination or delete it"
        )
    if old.get("version") != fmt.VERSION:
        if old.get("complete"):
            return  # a finished conversion in an older format: readable as it is
        raise StallscopeError(f"{dst}: an unfinished conversion in stallscope format "
                              f"{old.get('version')}; convert into a new destination")  # fmt: skip
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
    """The one writer. Records gather into chunks of `chunk` samples (format.py); a full chunk
    goes into the open write transaction at once, the partial one at each commit (rewritten
    as it grows), and a commit adds the progress marker (the last source index written + 1)
    to that same transaction, so committed data and committed progress always agree, whatever
    stops the process. On resume the committed partial chunk is read back."""

    def __init__(self, env, source: Source, progress: dict, chunk: int, needed: int) -> None:
        self.env = env
        self.source = source
        self.chunk = chunk
        self.needed = needed
        self.written = self.cur_written = int(progress["written"])
        self.next_source = self.cur_source = int(progress["next_source"])
        self.txn = None
        self.batch_n = self.batch_bytes = 0
        self.last_commit = time.monotonic()
        self.growths = 0
        self.pending: list[bytes] = self._committed_partial()
        self.committed_pending = list(self.pending)

    def _committed_partial(self) -> list[bytes]:
        k = self.written % self.chunk
        if k == 0:
            return []
        with self.env.begin() as txn:
            value = txn.get(fmt.sample_key(self.written // self.chunk))
            records = fmt.chunk_records(value) if value is not None else []
            out = [bytes(r) for r, _crc in records]
        if len(out) != k:
            raise StallscopeError(f"{self.env.path()}: its last chunk holds {len(out)} samples, "
                                  f"its progress says {k}; convert into a new destination")
        return out

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
                self._put(txn, index, mv[offset : offset + size], "")

    def _put(self, txn, index: int, record, reason: str) -> None:
        if record is None:
            txn.put(fmt.skip_key(index), _skip_value(self.source, index, reason))
        else:
            self.pending.append(bytes(record))
            self.cur_written += 1
            self.batch_n += 1
            self.batch_bytes += len(record)
            if len(self.pending) == self.chunk:
                self._put_chunk(txn)
                self.pending = []
        self.cur_source = index + 1

    def _put_chunk(self, txn) -> None:
        first = self.cur_written - len(self.pending)
        key = fmt.sample_key(first // self.chunk)
        rewrite = first < self.written  # its partial self was committed: replace it
        txn.put(key, fmt.pack_chunk(self.pending), append=not rewrite)

    def due(self, every: int, nbytes: int, seconds: float) -> bool:
        return (
            self.batch_n >= every
            or self.batch_bytes >= nbytes
            or time.monotonic() - self.last_commit >= seconds
        )

    def commit(self, meta: dict | None = None, report: dict | None = None, extra=()) -> None:
        txn = self._txn()
        progress = {"next_source": self.cur_source, "written": self.cur_written}
        try:
            if self.pending:
                self._put_chunk(txn)
            txn.put(fmt.PROGRESS_KEY, fmt.dumps(progress))
            if meta is not None:
                txn.put(fmt.META_KEY, fmt.dumps(meta))
            if report is not None:
                txn.put(fmt.REPORT_KEY, fmt.dumps(report))
            for key, value in extra:
                txn.put(key, value)
            txn.commit()
        except lmdb.MapFullError:
            raise
        except lmdb.Error as exc:
            self.abort()
            raise StallscopeError(_os_message(Path(self.env.path()), self.needed, exc)) from exc
        self.txn = None
        self.written, self.next_source = self.cur_written, self.cur_source
        self.committed_pending = list(self.pending)
        self.batch_n = self.batch_bytes = 0
        self.last_commit = time.monotonic()

    def commit_or_abort(self) -> None:
        try:
            self.commit()
        except (lmdb.Error, StallscopeError):
            self.abort()

    def abort(self) -> None:
        if self.txn is not None:
            with contextlib.suppress(lmdb.Error):
                self.txn.abort()
            self.txn = None
        self.cur_written, self.cur_source = self.written, self.next_source
        self.pending = list(self.committed_pending)
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
        os.path.getsize(dst / "data.mdb"), list(stored.get("stored", [])),
        list(stored.get("scan_skipped", [])), dict(stored.get("survey", {})),
    )  # fmt: skip
