"""Convert an image folder or a Python factory Dataset into a stallscope LMDB, resumably.

    job = convert("data/train", "data/train.lmdb", preprocess=Preprocess(resize=256))
    result = run_job(job, progress)          # or: stallscope-cli convert SRC DST

Decoding runs in a process pool (every core by default); this process is the one writer. Samples
are committed in batches and each batch's transaction also holds the progress marker, so a
conversion interrupted at any point (Ctrl-C, kill -9, power loss) resumes exactly where its last
commit ended: no duplicate and no missing sample (the LMDB is opened with metasync=False: a
commit syncs its data but not its meta page, so a power loss may undo the last commit, never
part of one). Unreadable samples are skipped and listed.
The LMDB format is described in format.py; no pickle is stored. What a destination holds and
the checks there: destination.py; the decoding pool: pool.py; the writer: writer.py; what the
first samples settle: probe.py.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import lmdb

from stallscope.core.errors import Cancelled, StallscopeError
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.decoder import NARROWED, PADDED
from stallscope.core.lmdb.destination import (
    DestState,
    check_resume,
    destination_state,
    lock_destination,
    os_errors,
    require_space,
    require_writable,
)
from stallscope.core.lmdb.errors import SourceError
from stallscope.core.lmdb.factory import FactorySource
from stallscope.core.lmdb.fields import stored_fields
from stallscope.core.lmdb.folder import FolderSource
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.inspection import exact_fields, exact_survey, lmdb_bytes, survey
from stallscope.core.lmdb.listing import listing_blocks, stored_folder
from stallscope.core.lmdb.pool import TASK_BYTES, DecodePool
from stallscope.core.lmdb.probe import record_estimate, settle_structure
from stallscope.core.lmdb.source import Source, open_source_job
from stallscope.core.lmdb.structure import leaf_names
from stallscope.core.lmdb.writer import Writer, read_skipped

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
    fields: list[dict] = field(default_factory=list)  # stored_fields(): name, dtype, shape
    scan_skipped: list[dict] = field(default_factory=list)  # {"path", "reason"}: not samples
    survey: dict = field(default_factory=dict)  # inspection.survey(): shapes seen
    narrowed: list[dict] = field(default_factory=list)  # deep images made 8-bit: mode, count
    padded: list[dict] = field(default_factory=list)  # images the crop padded: size, count
    crop: list | None = None  # the centre crop (w, h), for what is said of `padded`
    resized: bool = False  # a resize came before the crop
    top_level: dict = field(default_factory=dict)  # images beside class folders: count, example
    changed: list[dict] = field(default_factory=list)  # {"path", "reason"}: not as listed
    empty_classes: list[list] = field(default_factory=list)  # [label, class folder]: no image

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
    commit_every: int | None = None,
    commit_bytes: int = 256 << 20,
    commit_seconds: float = 2.0,
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

    A commit comes every commit_seconds, or after commit_bytes of records, or (when given)
    after commit_every samples: each costs a sync of the disk (~15 ms here), so committing by
    count alone (1000 tiny images, under 1 MB) spent more time syncing than converting; what a
    kill -9 can lose is the last ~2 s of decoding (Ctrl-C and errors commit what is decoded).
    """
    t0 = time.perf_counter()
    pre = preprocess or Preprocess()
    dst = Path(dst).expanduser().resolve()
    state = _state(dst)
    opened = src if isinstance(src, FolderSource | FactorySource) else None
    source = _stored_source(dst, state, opened.spec if opened else src)
    # resuming from the folder as the first run listed it: that listing is the source, whatever
    # the resumes took into it since (a file changed before it was converted)
    listed = state.meta["source"]["fingerprint"] if source is not None else None
    if source is None:
        source = opened or (yield from open_source_job(src))
    n = len(source)
    if n == 0:
        raise SourceError(f"{source.spec}: the dataset is empty")
    if state.kind == "ours" and state.complete and _same_source(state.meta, source.spec):
        check_resume(dst, state, _new_meta(source, pre, state.meta["structure"], 1, [], listed))
        return _result(dst, state.meta, t0, 0, state.progress["next_source"],
                       already_complete=True)  # fmt: skip
    structure, first, shapes = settle_structure(source, pre)
    est = record_estimate(source, pre, shapes)
    chunk_n = state.meta.get("chunk", 1) if state.kind == "ours" else fmt.chunk_for(est)
    meta = _new_meta(source, pre, structure, chunk_n, first, listed)
    meta["survey"] = survey(shapes, not pre.rgb)
    if isinstance(source, FolderSource):  # shapes from the survey: no image decoded here
        one = shapes[0] if len(set(shapes)) == 1 else None
        for f in meta["stored"]:
            f["shape"] = [] if f["kind"] == "int" else (list(one) if one else None)
    check_resume(dst, state, meta)
    if state.kind == "ours":  # what the first run's scan found stays with the LMDB
        for key in ("created", "scan_skipped", "scan_skipped_count", "top_level",
                    "empty_classes"):
            if key in state.meta:
                meta[key] = state.meta[key]
    progress = state.progress if state.kind == "ours" else {"next_source": 0, "written": 0}
    start = progress["next_source"]
    needed = int((n - start) * lmdb_bytes(est)) + (1 << 20)
    require_writable(dst)  # first: a read-only disk is not a full one
    require_space(dst, needed)
    with os_errors(dst, needed):
        dst.mkdir(parents=True, exist_ok=True)
        lock = lock_destination(dst)
    try:
        if map_size is None:
            map_size = int(n * lmdb_bytes(est) * 1.1) + (8 << 20)
        with os_errors(dst, needed):
            env = lmdb.open(
                str(dst), map_size=map_size if map_size > 0 else MIN_MAP_SIZE,
                subdir=True, readahead=False, meminit=False, max_dbs=0, metasync=False,
            )  # fmt: skip
    except BaseException:
        lock.close()
        raise
    writer = Writer(env, source, progress, chunk_n, needed)
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
                _exact_shapes(meta, writer, source)
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
    result = _result(dst, meta, t0, done, start, growths=writer.growths)
    result.changed = writer.changed
    return result


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
            return stored_folder(txn, meta)
    except fmt.FormatError as exc:
        raise StallscopeError(f"{dst}: {exc}; convert into a new destination") from exc
    finally:
        env.close()


def _listing_items(source: Source) -> list:
    if not isinstance(source, FolderSource):
        return []
    return list(listing_blocks(*source.listing()))


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


def _new_meta(source: Source, pre: Preprocess, structure: dict, chunk: int, first,
              fingerprint: str | None = None) -> dict:
    fields = source.fields() if isinstance(source, FolderSource) else leaf_names(structure)
    meta = {
        "format": fmt.FORMAT,
        "version": fmt.VERSION,
        "chunk": chunk,
        "source": {
            "kind": source.kind,
            "spec": source.spec,
            "count": len(source),
            "fingerprint": fingerprint or source.fingerprint(),
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
        meta["top_level"] = {"count": source.ignored_top_level,
                             "example": source.ignored_example}
        meta["empty_classes"] = source.empty_classes()[:100]
    return meta


def _exact_shapes(meta: dict, writer: Writer, source: Source) -> None:
    """The shapes (and dtypes) of every record written, in place of the survey's guess from
    a few samples: the header, the size warning and the snippet's collate use them."""
    meta["narrowed"] = [
        {"mode": note[len(NARROWED):], "count": n, "example": source.name_of(first)}
        for note, (n, first) in sorted(writer.cur_notes.items()) if note.startswith(NARROWED)
    ]  # fmt: skip
    padded = [(n, note[len(PADDED):], first) for note, (n, first) in writer.cur_notes.items()
              if note.startswith(PADDED)]  # fmt: skip
    meta["padded"] = [{"size": size, "count": n, "example": source.name_of(first)}
                      for n, size, first in sorted(padded, key=lambda p: (-p[0], p[1]))]
    counts = writer.layout_counts()
    if counts is None:  # resumed from a conversion that did not count them: the survey stays
        return
    layouts, more = counts
    meta["survey"] = exact_survey(layouts, more, source.name_of,
                                  not meta["preprocess"].get("rgb", True))
    meta["stored"] = exact_fields(meta["stored"], layouts, more)


def _report(writer: Writer, meta: dict, t0: float, start: int) -> dict:
    return {
        "count": meta["count"],
        "total": meta["source"]["count"],
        "skipped": writer.skipped(),
        "seconds_last_run": round(time.perf_counter() - t0, 3),
        "resumed_from": start,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }



def _result(dst: Path, meta: dict, t0: float, done: int, start: int, *, already_complete=False,
            growths=0) -> ConvertResult:  # fmt: skip
    env = lmdb.open(str(dst), readonly=True, lock=False, subdir=True)
    try:
        skipped = read_skipped(env)
        with env.begin() as txn:
            stored = fmt.loads(txn.get(fmt.META_KEY))
    finally:
        env.close()
    pre = stored.get("preprocess") or {}
    return ConvertResult(
        str(dst), int(stored["count"]), int(meta["source"]["count"]), skipped,
        time.perf_counter() - t0, done, start, already_complete, growths,
        os.path.getsize(dst / "data.mdb"), list(stored.get("stored", [])),
        list(stored.get("scan_skipped", [])), dict(stored.get("survey", {})),
        list(stored.get("narrowed", [])), list(stored.get("padded", [])),
        pre.get("crop"), bool(pre.get("resize")), dict(stored.get("top_level") or {}),
        changed=[], empty_classes=list(stored.get("empty_classes") or []),
    )  # fmt: skip
