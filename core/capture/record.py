"""The whole-run record: every step of the run in a bounded file beside events.jsonl.

    record.bin = header | block summaries (older steps) | recent steps (one row each)

A step is one fixed-size row appended with one write(), so a crashed or killed run keeps every
step it finished. Once RECENT_MAX rows are held, the oldest half is folded into summaries of
BLOCK steps each and the file is rewritten under a temporary name and renamed (readers always
see a whole file): a million steps stay under 2 MB. The record sees what the step events cannot:
a new DataLoader iterator (an epoch start) and how long until its first batch, time in
torch.save, time between steps outside the step's own loader (validation, logging), and which
DataLoader each step came from. Epoch starts and saves also go to events.jsonl (`epoch`,
`save`). A step's memory columns hold the stepper's latest reading (capture/stepping.py reads
memory at most once a MEMORY_EVERY_S). Standard library only (it runs in the user's interpreter);
core/session/record.py reads it.
"""

from __future__ import annotations

import os
import statistics
import struct
import threading
import time
from pathlib import Path

from . import pid

MAGIC = b"SSREC01\n"
HEADER = struct.Struct("<8sIIIId")  # magic, version, blocks, block size, recent max, t0 (epoch)
HEADER_SIZE = 64
VERSION = 1
BLOCK = 1024
RECENT_MAX = 32 * BLOCK
MAX_LOADERS = 4  # blocks keep wall time per loader for the first four loaders
OTHER_LOADER = 255
MAX_SAVE_EVENTS = 10_000

# one step: (name, struct code); the reader builds its numpy dtype from these
STEP_FIELDS = (
    ("n", "I"), ("t", "d"), ("wall_ms", "f"), ("data_wait_ms", "f"), ("gap_ms", "f"),
    ("epoch_ms", "f"), ("save_ms", "f"), ("other_ms", "f"), ("rss_mb", "f"),
    ("cuda_allocated_mb", "f"), ("cuda_reserved_mb", "f"), ("batches", "H"), ("loader", "B"),
    ("flags", "B"),
)
BLOCK_FIELDS = (
    ("first_n", "I"), ("count", "I"), ("t", "d"), ("wall_sum", "d"), ("wall_median", "f"),
    ("wall_min", "f"), ("wall_max", "f"), ("wall_max_n", "I"), ("wait_sum", "d"),
    ("gap_sum", "d"), ("epoch_sum", "d"), ("save_sum", "d"), ("other_sum", "d"),
    ("rss_max", "f"), ("cuda_allocated_max", "f"), ("cuda_reserved_max", "f"),
    ("epochs", "H"), ("profiled", "H"),
    *((f"loader{i}_wall", "d") for i in range(MAX_LOADERS)),
    *((f"loader{i}_steps", "I") for i in range(MAX_LOADERS)),
)
STEP = struct.Struct("<" + "".join(code for _, code in STEP_FIELDS))
BLOCK_ROW = struct.Struct("<" + "".join(code for _, code in BLOCK_FIELDS))
EPOCH_START, PROFILED, WARMUP = 1, 2, 4  # flags
MB = float(1 << 20)


def _f(value) -> float:
    if value.__class__ is float:  # a step's own figures: no conversion
        return value  # type: ignore[no-any-return]  # a float, as just checked
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else float("nan")


class _Loader:
    """One DataLoader call site, as the record numbers it (in the order first iterated)."""

    def __init__(self, index: int, site: str) -> None:
        self.index, self.site = index, site
        self.epochs = 0
        self.end_ms = 0.0  # its last epoch's end: StopIteration, workers shut down


class _Pending:
    """What one step saw so far: fetches by loader, new iterators, torch.save time."""

    __slots__ = ("fetches", "iters", "epoch_ms", "end_ms", "last", "save_s")

    def __init__(self) -> None:
        # loader -> [first start, last end, count, seconds in its fetches]
        self.fetches: dict[int, list[float]] = {}
        self.iters: dict[int, float] = {}           # loader -> start of its new iterator
        self.epoch_ms: dict[int, float] = {}        # loader -> iterator start to first batch
        self.end_ms: dict[int, float] = {}          # loader -> its epoch's end (StopIteration)
        self.last: int | None = None                # the loader of the latest batch
        self.save_s = 0.0


class RunRecord:
    """Writes record.bin; fed by the step events (EventLog) and the hooks below."""

    def __init__(self, path: Path, emit=None) -> None:
        self.path = Path(path)
        self.emit = emit or (lambda kind, **fields: None)
        self.pid = pid.current
        self.t0 = time.perf_counter()
        self.t0_wall = time.time()
        self.blocks = bytearray()
        self.recent = bytearray()
        self.first_recent = 0
        self.steps = 0
        self.saves = 0
        self.loaders: dict[str, _Loader] = {}
        self.fed: dict[int, int] = {}  # loader -> steps it fed (the training loader: most)
        self.pending = _Pending()
        self._lock = threading.Lock()
        self._save_depth = 0
        self._fd: int | None = None
        self._rewrite()

    # -- file
    def _header(self) -> bytes:
        head = HEADER.pack(MAGIC, VERSION, len(self.blocks) // BLOCK_ROW.size, BLOCK,
                           RECENT_MAX, self.t0_wall)
        return head.ljust(HEADER_SIZE, b"\0")

    def _rewrite(self) -> None:
        """The whole file under a temporary name, then renamed over the old one."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.part")
        with open(tmp, "wb") as f:
            f.write(self._header() + bytes(self.blocks) + bytes(self.recent))
        os.replace(tmp, self.path)
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None and pid.current == self.pid:
                os.close(self._fd)
            self._fd = None

    def main_loader(self) -> _Loader | None:
        """The loader that fed the most steps so far (before any step: the first iterated)."""
        if not self.loaders:
            return None
        by_index = {lo.index: lo for lo in self.loaders.values()}
        if self.fed:
            return by_index.get(max(self.fed, key=self.fed.__getitem__))
        return by_index[0]

    # -- hooks (the runner's main process only)
    def _loader(self, iterator) -> _Loader:
        site = getattr(iterator, "_stallscope_site", None) or "?"
        loader = self.loaders.get(site)
        if loader is None:
            loader = self.loaders[site] = _Loader(len(self.loaders), site)
        return loader

    def iterator_started(self, dataloader, iterator, start: float) -> None:
        """DataLoader.__iter__ returned `iterator` (a new epoch; persistent workers return the
        same iterator again)."""
        if pid.current != self.pid:
            return
        try:
            iterator._stallscope_epoch = (start, dataloader)
        except Exception:  # noqa: BLE001 - an iterator that takes no attributes: no epoch
            return
        self.pending.iters[self._loader(iterator).index] = start

    def fetched(self, iterator, start: float, end: float, got: bool) -> None:
        if pid.current != self.pid:
            return
        loader = self._loader(iterator)
        if not got:  # StopIteration ends an epoch (and shuts non-persistent workers down)
            ms = (end - start) * 1e3
            loader.end_ms = ms
            self.pending.end_ms[loader.index] = self.pending.end_ms.get(loader.index, 0.0) + ms
            return
        f = self.pending.fetches.get(loader.index)
        if f is None:
            self.pending.fetches[loader.index] = [start, end, 1, end - start]
        else:
            f[1], f[2], f[3] = end, f[2] + 1, f[3] + end - start
        self.pending.last = loader.index
        epoch = getattr(iterator, "_stallscope_epoch", None)
        if epoch is None:
            return
        iterator._stallscope_epoch = None
        began, dataloader = epoch
        first_ms = (end - began) * 1e3
        self.pending.epoch_ms[loader.index] = first_ms
        workers = getattr(dataloader, "num_workers", 0)
        self.emit("epoch", loader=loader.index, site=loader.site, epoch=loader.epochs,
                  n=self.steps, at=round(began - self.t0, 6),
                  first_batch_ms=round(first_ms, 3), fetch_ms=round((end - start) * 1e3, 3),
                  previous_end_ms=round(loader.end_ms, 3),
                  workers=workers if isinstance(workers, int) else 0,
                  persistent_workers=bool(getattr(dataloader, "persistent_workers", False)))
        loader.epochs += 1
        loader.end_ms = 0.0

    def saved(self, start: float, end: float, target) -> None:
        if pid.current != self.pid:
            return
        self.pending.save_s += end - start
        self.saves += 1
        if self.saves <= MAX_SAVE_EVENTS:
            nbytes = None
            if isinstance(target, (str, os.PathLike)):
                try:
                    nbytes = os.path.getsize(target)
                except OSError:
                    pass
            self.emit("save", n=self.steps, at=round(start - self.t0, 6),
                      ms=round((end - start) * 1e3, 3), bytes=nbytes)

    def finish(self) -> None:
        """The script is over: what followed its last step (a last validation, a final
        save) goes to events.jsonl as `run_tail`."""
        if pid.current != self.pid:
            return
        p, self.pending = self.pending, _Pending()
        now = time.perf_counter()
        others = [f[0] for f in p.fetches.values()]
        self.emit("run_tail", n=self.steps, save_ms=round(p.save_s * 1e3, 3),
                  other_ms=round((now - min(others)) * 1e3, 3) if others else 0.0,
                  loaders=sorted(p.fetches))

    # -- one step (from the step event)
    def step(self, fields: dict) -> None:
        """One step's row. Fetches from other loaders before the step's own first batch (a
        validation loop between optimizer steps) are the record's `other_ms`, validation:
        their time and batches are taken out of the step event's `data_wait_ms` and
        `batches` here, in `fields` itself, so the event line written after this row says
        the same (docs/definitions.md, "Steps")."""
        if pid.current != self.pid or self._fd is None:
            return
        now = time.perf_counter()
        get = fields.get
        wall_ms = _f(get("wall_ms"))
        p, self.pending = self.pending, _Pending()
        own = p.last
        gap_ms = other_ms = epoch_ms = 0.0
        flags = 0
        if own is not None:
            start = now - (wall_ms / 1e3 if wall_ms == wall_ms else 0.0)
            begin = p.fetches[own][0]
            if p.iters:
                begin = min(begin, p.iters.get(own, begin))
            others: dict[int, list[float]] = {}
            if len(p.fetches) > 1:
                # validation: another loader's loop before the step's own first batch, more
                # batches of it than of the step's own; a loop drawing a batch from each of two
                # loaders a step (zip(A, B)) has as many of each: both are the step's data
                mine = p.fetches[own][2]
                others = {i: f for i, f in p.fetches.items()
                          if i != own and f[0] < begin and f[2] > mine}
                # the gap ends where the step's data begins: zip(A, B)'s A, not only B
                begin = min(begin, *(min(f[0], p.iters.get(i, f[0]))
                                     for i, f in p.fetches.items() if i not in others))
            gap_ms = max(0.0, (begin - start) * 1e3)
            if others:
                first = min(f[0] for f in others.values())
                other_ms = min(gap_ms, max(0.0, (begin - first) * 1e3))
                _not_the_steps(fields, others, p.end_ms)
            if own in p.epoch_ms:  # the pause at the epoch boundary: the old epoch's end too
                ended = min(p.end_ms.get(own, 0.0), gap_ms)
                epoch_ms = p.epoch_ms[own] + ended
                gap_ms -= ended
                flags |= EPOCH_START
            self.fed[own] = self.fed.get(own, 0) + 1
        phase = get("phase")
        if phase == "active":
            flags |= PROFILED
        elif phase == "warmup":
            flags |= WARMUP
        batches = get("batches")
        batches = batches if batches.__class__ is int else int(batches or 0)
        row = STEP.pack(
            self.steps & 0xFFFFFFFF, now - self.t0, wall_ms, _f(get("data_wait_ms")),
            gap_ms, epoch_ms, p.save_s * 1e3, other_ms, _f(get("rss")) / MB,
            _f(get("cuda_allocated")) / MB, _f(get("cuda_reserved")) / MB,
            min(max(batches, 0), 0xFFFF),
            OTHER_LOADER if own is None else min(own, OTHER_LOADER - 1), flags)
        with self._lock:
            self.steps += 1
            self.recent += row
            os.write(self._fd, row)
            if len(self.recent) >= RECENT_MAX * STEP.size:
                self._fold()

    def _fold(self) -> None:
        """The oldest half of the recent rows become block summaries; the file is rewritten."""
        cut = (RECENT_MAX // 2) * STEP.size
        old, self.recent = self.recent[:cut], self.recent[cut:]
        rows = list(STEP.iter_unpack(bytes(old)))
        for i in range(0, len(rows), BLOCK):
            self.blocks += summarize(rows[i:i + BLOCK])
        self.first_recent += len(rows)
        self._rewrite()


def _not_the_steps(fields: dict, others: dict[int, list[float]],
                   end_ms: dict[int, float]) -> None:
    """The step event's data wait and batches without the fetches of `others` (loader ->
    [first start, last end, count, seconds]) and their loaders' epoch ends (StopIteration)."""
    wait = fields.get("data_wait_ms")
    if isinstance(wait, float) and wait == wait:
        ms = sum(f[3] * 1e3 + end_ms.get(i, 0.0) for i, f in others.items())
        fields["data_wait_ms"] = max(0.0, wait - ms)
    batches = fields.get("batches")
    if isinstance(batches, int) and not isinstance(batches, bool):
        fields["batches"] = max(0, batches - int(sum(f[2] for f in others.values())))


def _finite(values: tuple) -> tuple | list:
    """`values` without its NaNs (the tuple itself when it holds none: the common case)."""
    total = sum(values)
    return values if total == total else [v for v in values if v == v]


def summarize(rows: list[tuple]) -> bytes:
    """One block summary of step rows (tuples in STEP_FIELDS order)."""
    col = dict(zip((name for name, _ in STEP_FIELDS), zip(*rows)))
    walls = col["wall_ms"]
    wall = _finite(walls)
    at_max = walls.index(max(wall)) if wall else 0  # the first of the longest
    by_loader = [0.0] * MAX_LOADERS
    steps_by_loader = [0] * MAX_LOADERS
    for w, lo in zip(walls, col["loader"]):
        if lo < MAX_LOADERS:
            by_loader[lo] += w if w == w else 0.0
            steps_by_loader[lo] += 1

    def total(name: str) -> float:
        return float(sum(_finite(col[name])))

    def peak(name: str) -> float:
        vals = _finite(col[name])
        return max(vals) if vals else float("nan")

    return BLOCK_ROW.pack(
        col["n"][0], len(rows), col["t"][-1], sum(wall),
        statistics.median(wall) if wall else float("nan"),
        min(wall) if wall else float("nan"), max(wall) if wall else float("nan"),
        col["n"][at_max], total("data_wait_ms"), total("gap_ms"), total("epoch_ms"),
        total("save_ms"), total("other_ms"), peak("rss_mb"), peak("cuda_allocated_mb"),
        peak("cuda_reserved_mb"), sum(1 for f in col["flags"] if f & EPOCH_START),
        sum(1 for f in col["flags"] if f & PROFILED), *by_loader, *steps_by_loader)


def install_record_hooks(torch, record: RunRecord) -> list:
    """DataLoader.__iter__ (epoch starts), iterator __next__ (which loader, first batch) and
    torch.save (checkpoints); returns undo callables. Installed after the step hooks: when
    theirs already feeds this record its fetches (capture/stepping.py: one wrapper around
    next(), timed whole), __next__ is left to it."""
    from torch.utils.data import DataLoader, dataloader

    base_iter = dataloader._BaseDataLoaderIter
    inner_next = base_iter.__next__
    inner_iter = DataLoader.__iter__
    inner_save = torch.save
    clock = time.perf_counter

    def record_iter(self):
        start = clock()
        it = inner_iter(self)
        record.iterator_started(self, it, start)
        return it

    def record_next(self):
        start = clock()
        got = False
        try:
            batch = inner_next(self)
            got = True
            return batch
        finally:
            record.fetched(self, start, clock(), got)

    def record_save(obj, f, *args, **kwargs):
        record._save_depth += 1
        start = clock()
        try:
            return inner_save(obj, f, *args, **kwargs)
        finally:
            record._save_depth -= 1
            if record._save_depth == 0:
                record.saved(start, clock(), f)

    record_save.__wrapped__ = inner_save  # type: ignore[attr-defined]  # the undo mark
    record_save.__doc__ = inner_save.__doc__
    DataLoader.__iter__ = record_iter
    torch.save = record_save
    undo = [lambda: setattr(DataLoader, "__iter__", inner_iter),
            lambda: setattr(torch, "save", inner_save)]
    if getattr(inner_next, "feeds_record", None) is not record:
        base_iter.__next__ = record_next
        undo.append(lambda: setattr(base_iter, "__next__", inner_next))
    return undo
