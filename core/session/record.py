"""Reading a session's whole-run record (record.bin, written by capture/record.py) into numpy:
recent steps one row each, older steps as block summaries, plus the epoch starts, saves and
profiled windows from the events.

    rec = load_record(session)            # core/session/reader.Session; None without a record
    x, wall_max, wall_mean, wait_mean = rec.overview(2000).values()   # decimated, any range
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from stallscope.core.capture import layout
from stallscope.core.capture import record as fmt
from stallscope.core.errors import StallscopeError
from stallscope.core.session.steady import queued_batches
from stallscope.core.untrusted import CAPS, finite, read_bytes

_CODES = {"I": "<u4", "d": "<f8", "f": "<f4", "H": "<u2", "B": "u1"}
STEP_DTYPE = np.dtype([(name, _CODES[c]) for name, c in fmt.STEP_FIELDS])
BLOCK_DTYPE = np.dtype([(name, _CODES[c]) for name, c in fmt.BLOCK_FIELDS])
MAX_BYTES = CAPS["record.bin"]  # a record is a few MB; anything far larger is not one
# The events' fields the analysis reads, with their types: a session from elsewhere may hold
# anything in them.
EPOCH_FIELDS = {"loader": int, "n": int, "epoch": int, "workers": int, "site": str,
                "first_batch_ms": float, "fetch_ms": float, "previous_end_ms": float,
                "persistent_workers": bool}
SAVE_FIELDS = {"n": int, "ms": float, "bytes": int}
TAIL_FIELDS = {"n": int, "save_ms": float, "other_ms": float}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _typed(event: dict, fields: dict) -> dict:
    """Only the known fields, each of its type (else left out): no string where a number
    goes, no NaN."""
    out = {}
    for key, kind in fields.items():
        v = event.get(key)
        if kind is int and _is_int(v):
            out[key] = v
        elif kind is float and isinstance(v, int | float) and not isinstance(v, bool) \
                and np.isfinite(v):
            out[key] = float(v)
        elif kind is str and isinstance(v, str):
            out[key] = v
        elif kind is bool and isinstance(v, bool):
            out[key] = v
    return out


@dataclass
class Window:
    """A profiled window: its steps and its trace (relative to the session)."""

    first: int
    last: int
    trace: str


@dataclass
class Record:
    path: Path
    t0: float                      # the run's start, epoch seconds
    block: int
    blocks: np.ndarray             # BLOCK_DTYPE
    steps: np.ndarray              # STEP_DTYPE, the recent steps, in order
    epochs: list[dict] = field(default_factory=list)
    saves: list[dict] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    loaders: dict[int, str] = field(default_factory=dict)
    tail: dict = field(default_factory=dict)  # after the last step: {other_ms, save_ms, ...}
    queued: int = 0  # batches the workers queue (load_record: from run.json's DataLoaders)
    lineprof: bool = False  # the run was line-profiled (run.json): its cost is in every step
    nbytes: int = 0

    @property
    def n_steps(self) -> int:
        return int(self.blocks["count"].sum()) + len(self.steps)

    @property
    def first_full(self) -> int:
        """The first step held at full resolution (older ones are in blocks)."""
        return int(self.steps["n"][0]) if len(self.steps) else self.n_steps

    def total(self, name: str) -> float:
        """A step column's sum over the whole run (ms), blocks included."""
        block = {"wall_ms": "wall_sum", "data_wait_ms": "wait_sum", "gap_ms": "gap_sum",
                 "epoch_ms": "epoch_sum", "save_ms": "save_sum", "other_ms": "other_sum"}[name]
        return float(np.nansum(self.blocks[block]) + np.nansum(self.steps[name]))

    def loader_wall(self) -> dict[int, tuple[int, float]]:
        """Per loader: (steps, wall ms) over the whole run (blocks hold the first four)."""
        out: dict[int, tuple[int, float]] = {}
        for i in range(fmt.MAX_LOADERS):
            out[i] = (int(self.blocks[f"loader{i}_steps"].sum()),
                      float(self.blocks[f"loader{i}_wall"].sum()))
        for i in np.unique(self.steps["loader"]):
            sel = self.steps["loader"] == i
            n, w = out.get(int(i), (0, 0.0))
            out[int(i)] = (n + int(sel.sum()), w + float(np.nansum(self.steps["wall_ms"][sel])))
        return {k: v for k, v in out.items() if v[0] > 0}

    def median_step_ms(self) -> float:
        """Median step time; older blocks count by their medians, weighted by their steps."""
        walls = self.steps["wall_ms"][1:] if self.first_full == 0 else self.steps["wall_ms"]
        vals = np.concatenate([np.repeat(self.blocks["wall_median"].astype(np.float64),
                                         np.minimum(self.blocks["count"], 64)),
                               walls.astype(np.float64)])
        vals = vals[np.isfinite(vals)]
        return float(np.median(vals)) if len(vals) else float("nan")

    def overview(self, buckets: int = 2000, lo: float | None = None,
                 hi: float | None = None) -> dict[str, np.ndarray]:
        """The whole run decimated to at most `buckets` points over steps [lo, hi): per point
        its first step `x`, the max and mean step time, the mean data wait (ms), and the peak
        RSS and CUDA memory allocated (MB; NaN where not recorded)."""
        b, s = self.blocks, self.steps
        x = np.concatenate([b["first_n"], s["n"]]).astype(np.float64)
        count = np.concatenate([b["count"].astype(np.float64), np.ones(len(s))])
        sums = {"wall_mean": np.concatenate([b["wall_sum"], np.nan_to_num(s["wall_ms"])]),
                "wait_mean": np.concatenate([b["wait_sum"], np.nan_to_num(s["data_wait_ms"])])}
        peaks = {"wall_max": np.concatenate([b["wall_max"], np.nan_to_num(s["wall_ms"])]),
                 "rss_max": np.concatenate([b["rss_max"], s["rss_mb"]]),
                 "cuda_max": np.concatenate([b["cuda_allocated_max"], s["cuda_allocated_mb"]])}
        peaks = {k: v.astype(np.float64) for k, v in peaks.items()}
        lo = float(x[0]) if lo is None and len(x) else (lo or 0.0)
        hi = float(self.n_steps) if hi is None else hi
        keep = (x + count > lo) & (x < hi)
        x, count = x[keep], count[keep]
        sums = {k: v[keep] for k, v in sums.items()}
        peaks = {k: v[keep] for k, v in peaks.items()}
        if len(x) > buckets:
            idx = np.clip(((x - lo) / ((hi - lo) / buckets)).astype(np.int64), 0, buckets - 1)
            starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
            x, count = x[starts], np.add.reduceat(count, starts)
            sums = {k: np.add.reduceat(v, starts) for k, v in sums.items()}
            peaks = {k: np.fmax.reduceat(v, starts) for k, v in peaks.items()}
        return {"x": x, **{k: v / count for k, v in sums.items()}, **peaks}


def read_record(path: str | os.PathLike) -> Record:
    """One record file; a torn last row (a run killed mid-write) is dropped."""
    p = Path(path)
    data = read_bytes(p, "record.bin")
    if len(data) < fmt.HEADER_SIZE or not data.startswith(fmt.MAGIC):
        raise StallscopeError(f"{p}: not a stallscope run record")
    _, version, nblocks, block, _, t0 = fmt.HEADER.unpack_from(data)
    if version != fmt.VERSION:
        raise StallscopeError(f"{p}: run record version {version} (this stallscope reads "
                              f"{fmt.VERSION})")
    start = fmt.HEADER_SIZE
    end = start + nblocks * BLOCK_DTYPE.itemsize
    if end > len(data):
        raise StallscopeError(f"{p}: run record is cut short")
    if finite(t0) is None or block < 1:
        raise StallscopeError(f"{p}: damaged run record header (start {t0}, block {block})")
    blocks = np.frombuffer(data, BLOCK_DTYPE, nblocks, start).copy()
    rows = (len(data) - end) // STEP_DTYPE.itemsize
    steps = np.frombuffer(data, STEP_DTYPE, rows, end).copy()
    return Record(p, float(t0), int(block), blocks, steps, nbytes=len(data))


RECORD_EVENTS = frozenset({layout.EPOCH, layout.SAVE, layout.RUN_TAIL, layout.TRACE_READY})


def load_record(session, rank: int | None = None) -> Record | None:
    """The record of a Session (core/session/reader.py), with its epoch, save and window
    events; None when the session has none (an older session)."""
    path = record_path(session.path, rank, session.ranks)
    if path is None:
        return None
    rank = layout.rank_of_file(path.name)
    rec = with_events(read_record(path), session.events, rank)
    rec.queued = queued_batches(session.loaders())
    rec.lineprof = session.line_profiled
    return rec


def record_path(folder: Path, rank: int | None = None, ranks=()) -> Path | None:
    """The session's record file (rank 0's, or the first rank's, under torchrun)."""
    path = folder / layout.record_name(rank)
    if not path.exists() and rank is None and ranks:
        path = folder / layout.record_name(ranks[0])
    return path if path.exists() or path.is_symlink() else None


def with_events(rec: Record, events: list[dict], rank: int | None = None) -> Record:
    """The record's epoch starts, saves, tail and profiled windows from the session's events
    (decoded lines; a live view keeps those of RECORD_EVENTS kinds as they arrive)."""
    mine = [e for e in events if e.get("rank") == rank and e.get("event") in RECORD_EVENTS]
    rec.epochs = [_typed(e, EPOCH_FIELDS) for e in mine if e.get("event") == layout.EPOCH
                  and _is_int(e.get("loader"))]
    rec.saves = [_typed(e, SAVE_FIELDS) for e in mine if e.get("event") == layout.SAVE]
    rec.loaders = {int(e["loader"]): str(e.get("site", "?")) for e in rec.epochs}
    tails = [_typed(e, TAIL_FIELDS) for e in mine if e.get("event") == layout.RUN_TAIL]
    rec.tail = tails[-1] if tails else {}
    rec.windows = []
    for e in mine:
        w = e.get("window")
        if e.get("event") == layout.TRACE_READY and isinstance(w, list) and len(w) == 2 \
                and all(_is_int(v) for v in w):
            rec.windows.append(Window(w[0], w[1], str(e.get("path", ""))))
    return rec
