"""Convert an image folder or a Python factory Dataset into a stallscope LMDB, resumably.

    job = convert("data/train", "data/train.lmdb", preprocess=Preprocess(resize=256))
    result = run_job(job, progress)          # or: python -m stallscope.core.lmdb_convert SRC DST

Decoding runs in a process pool (every core by default); this process is the one writer. Samples
are committed in batches and each batch's transaction also holds the progress marker, so a
conversion interrupted at any point (Ctrl-C, kill -9, power loss) resumes exactly where its last
commit ended: no duplicate and no missing sample. Unreadable samples are skipped and listed.
The LMDB format is described in lmdb_format.py; no pickle is stored.
"""

from __future__ import annotations

import contextlib
import fcntl
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

from . import lmdb_format as fmt
from .errors import Cancelled, StallscopeError
from .jobs import CancelFlag, Job
from .lmdb_source import (
    Decoder,
    FolderSource,
    Preprocess,
    SampleError,
    Source,
    SourceError,
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
    if map_size is None:
        from .lmdb_source import inspect_source

        map_size = int(inspect_source(src, pre, n_preview=2, n_size=16).estimated_bytes * 1.1)
    env = lmdb.open(
        str(dst), map_size=map_size if map_size > 0 else MIN_MAP_SIZE,
        subdir=True, readahead=False, meminit=False, max_dbs=0,
    )  # fmt: skip
    writer = _Writer(env, progress)
    if state.kind != "ours":
        writer.commit([], [], meta=meta)  # claims dst before any sample is written
    start = progress["next_source"]
    workers = (os.cpu_count() or 1) if workers is None else max(0, int(workers))
    chunk = chunk or max(1, min(64, (n - start) // (max(workers, 1) * 8)))
    decoder = _Pool(source, pre, structure, workers, mp_context)
    pending: list[tuple[int, bytes, bytes]] = []  # (source index, key, record), in key order
    skips: list[tuple[int, bytes, bytes]] = []
    last_commit = time.monotonic()
    try:
        inflight: deque = deque()
        next_task = start
        depth = max(2, 2 * workers)
        while next_task < n or inflight:
            while next_task < n and len(inflight) < depth:
                stop = min(n, next_task + chunk)
                inflight.append(decoder.submit(source.task(next_task, stop)))
                next_task = stop
            for index, record, reason in inflight.popleft().get():
                if record is None:
                    skips.append((index, fmt.skip_key(index), _skip_value(source, index, reason)))
                else:
                    key = fmt.sample_key(writer.written + len(pending))
                    pending.append((index, key, record))
            nbytes = sum(len(r) for _i, _k, r in pending)
            if (
                len(pending) >= commit_every
                or nbytes >= commit_bytes
                or time.monotonic() - last_commit >= commit_seconds
            ):
                writer.commit(pending, skips)
                last_commit = time.monotonic()
            yield writer.pending_source(pending, skips), n
            if cancel is not None:
                cancel.check()
        meta = dict(meta, complete=True, count=writer.written + len(pending))
        skipped = read_skipped(env) + [fmt.loads(v) for *_, v in skips]
        report = _report(meta, skipped, t0, start)
        writer.commit(pending, skips, meta=meta, report=report)
    except (Cancelled, KeyboardInterrupt, GeneratorExit):
        writer.commit(pending, skips)  # keep what is decoded; resume continues from here
        raise
    finally:
        decoder.close()
        env.close()
        lock.close()
    return _result(dst, meta, t0, writer.next_source - start, start, growths=writer.growths)


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


def _new_meta(source: Source, pre: Preprocess, structure: dict) -> dict:
    from .lmdb_source import leaf_names

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
    """The one writer. Each commit holds data and progress together, and grows the map on need.

    Progress is derived from the batch itself (the last source index it holds), so whatever point
    an interruption hits, the committed marker and the committed samples agree.
    """

    def __init__(self, env: lmdb.Environment, progress: dict) -> None:
        self.env = env
        self.written = int(progress["written"])
        self.next_source = int(progress["next_source"])
        self.growths = 0

    def pending_source(self, records, skips) -> int:
        last = max(records[-1][0] if records else -1, skips[-1][0] if skips else -1)
        return max(self.next_source, last + 1)

    def commit(self, records, skips, meta: dict | None = None, report: dict | None = None) -> None:
        """Writes and then empties records and skips: [(source index, key, value)]."""
        progress = {
            "next_source": self.pending_source(records, skips),
            "written": self.written + len(records),
        }
        while True:
            try:
                with self.env.begin(write=True) as txn:
                    for _index, key, value in records:
                        txn.put(key, value, append=True)
                    for _index, key, value in skips:
                        txn.put(key, value)
                    txn.put(fmt.PROGRESS_KEY, fmt.dumps(progress))
                    if meta is not None:
                        txn.put(fmt.META_KEY, fmt.dumps(meta))
                    if report is not None:
                        txn.put(fmt.REPORT_KEY, fmt.dumps(report))
                break
            except lmdb.MapFullError:
                size = self.env.info()["map_size"]
                need = sum(len(v) for *_, v in records) + sum(len(v) for *_, v in skips)
                self.env.set_mapsize(max(2 * size, size + 2 * need + (1 << 20)))
                self.growths += 1
            except lmdb.Error as exc:
                raise StallscopeError(f"{self.env.path()}: writing failed: {exc}") from exc
        records.clear()
        skips.clear()
        self.written = progress["written"]
        self.next_source = progress["next_source"]


def _report(meta: dict, skipped: list[dict], t0: float, start: int) -> dict:
    return {
        "count": meta["count"],
        "total": meta["source"]["count"],
        "skipped": skipped,
        "seconds_last_run": round(time.perf_counter() - t0, 3),
        "resumed_from": start,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def read_skipped(env: lmdb.Environment) -> list[dict]:
    out = []
    with env.begin() as txn, txn.cursor() as cur:
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


class _Done:
    def __init__(self, value) -> None:
        self.value = value

    def get(self):
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

    def __post_init__(self) -> None:
        args = (source_desc(self.source), self.pre.to_dict(), self.structure)
        if self.workers == 0:
            self._local = Decoder(*args)
            return
        ctx = mp.get_context(self.mp_context or default_context())
        self._pool = ctx.Pool(self.workers, _init_worker, (os.getpid(), *args))

    def submit(self, task):
        if self._local is not None:
            return _Done(self._local.records(task))
        return self._pool.apply_async(_decode_task, (task,))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()


def default_context() -> str:
    """fork is quickest, but only safe from a single-threaded process (not from the GUI)."""
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return "fork"
    return "spawn"


_DECODER: Decoder | None = None
_INIT_ERROR: str | None = None


def _init_worker(parent_pid: int, desc: dict, pre: dict, structure: dict) -> None:
    global _DECODER, _INIT_ERROR
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and commits
    try:
        _DECODER = Decoder(desc, pre, structure)
    except Exception as exc:  # noqa: BLE001 - reported by the first task, not by a respawn loop
        _INIT_ERROR = str(exc)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _decode_task(task: list) -> list:
    if _DECODER is None:
        raise SourceError(_INIT_ERROR or "decoder did not start")
    return _DECODER.records(task)


def _die_with_parent(parent_pid: int) -> None:
    """A killed converter must not leave decoding workers behind."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:
        os._exit(1)


if __name__ == "__main__":
    from .cli import main

    sys.exit(main(["convert", *sys.argv[1:]]))
