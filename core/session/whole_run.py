"""The whole run's own figures, from record.bin's clock (every step, each row stamped with its
end): how long the run took and its steady window (core/session/steady.py), never a sum of step
times (step wall times leave out what happens between steps).

    clock = run_clock(record)       # start-up (step 0), then the other steps' elapsed time
    w = record_steady(record)       # the steady statistic over the whole run (a Steady)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from stallscope.core.capture import record as fmt
from stallscope.core.session.record import Record, load_record
from stallscope.core.session.steady import (
    LONG_S,
    LONG_STEPS,
    MIN_S,
    MIN_STEPS,
    Steady,
    epoch_waits,
    steady,
    window,
)

if TYPE_CHECKING:
    from stallscope.core.session.reader import Session

PAUSES = fmt.PROFILED | fmt.WARMUP  # a profiling window's steps: its trace is written after


@dataclass(frozen=True)
class RunClock:
    steps: int
    startup_s: float   # from the runner's start to step 0's end (imports, set-up, step 0)
    elapsed_s: float   # from step 0's end to the last step's end (every gap between steps)

    @property
    def wall_s(self) -> float:
        return self.startup_s + self.elapsed_s


def main_loader(rec: Record) -> int | None:
    """The DataLoader that fed the most steps (the training loader)."""
    by = rec.loader_wall()
    by.pop(fmt.OTHER_LOADER, None)
    return max(by, key=lambda k: by[k][0]) if by else None


def training_epochs(rec: Record) -> list[dict]:
    main = main_loader(rec)
    return [e for e in rec.epochs if e.get("loader") == main]


def run_clock(rec: Record) -> RunClock:
    """The run's time on the record's clock: a row's time is its step's end, in seconds since
    the record was created (as the runner started)."""
    s, b = rec.steps, rec.blocks
    if len(b):  # step 0 is folded: its block's end less the other steps' time, their walls
        # stretched by the gaps between steps at the next block's pace (elapsed per wall)
        step0 = b["wall_max"][0] if b["wall_max_n"][0] == 0 else b["wall_median"][0]
        pace = 1.0
        if len(b) > 1 and b["wall_sum"][1] > 0:
            pace = max(1.0, float(b["t"][1] - b["t"][0]) / (float(b["wall_sum"][1]) / 1e3))
        step0_end = float(b["t"][0]) - (float(b["wall_sum"][0]) - float(step0)) / 1e3 * pace
    elif len(s):
        step0_end = float(s["t"][0])
    else:
        return RunClock(0, 0.0, 0.0)
    end = float(s["t"][-1]) if len(s) else float(b["t"][-1])
    step0_end = min(max(step0_end, 0.0), end) if np.isfinite(step0_end) else 0.0
    return RunClock(rec.n_steps, step0_end, end - step0_end)


def record_steady(rec: Record, min_steps: int = MIN_STEPS,
                  min_s: float = MIN_S) -> Steady | None:
    """The steady window of the whole run (the rule of core/session/steady.py: after the last
    pause, step 0 or a profiling window, the queued batches and a few steps), event times in
    seconds since the epoch. In a run long enough to fold into blocks the warm-up ends with
    the block holding the last profiled step (block 0 when none is)."""
    s, b = rec.steps, rec.blocks
    epochs = training_epochs(rec)
    if not len(b) or (s["flags"] & PAUSES).any():
        if not len(s):
            return None
        phase = ["active" if f & fmt.PROFILED else "warmup" if f & fmt.WARMUP else ""
                 for f in s["flags"].tolist()]
        return steady(s["t"].astype(float) + rec.t0, s["wall_ms"], s["data_wait_ms"],
                      s["batches"], phase, _queued(rec), min_steps, min_s,
                      n=s["n"], epochs=epochs)
    profiled = np.flatnonzero(b["profiled"])
    j = int(profiled[-1]) if len(profiled) else 0
    first = int(b["first_n"][j] + b["count"][j])
    count = rec.n_steps - first
    if count <= 0:
        return None
    t0 = float(b["t"][j])
    t1 = float(s["t"][-1]) if len(s) else float(b["t"][-1])
    seconds = max(0.0, t1 - t0)
    waited = float(np.nansum(b["wait_sum"][j + 1:]) + np.nansum(s["data_wait_ms"]))
    reached = (count >= min_steps and seconds >= min_s) or (count >= LONG_STEPS
                                                            and seconds >= LONG_S)
    return window(count, seconds, waited, epoch_waits(epochs, first, rec.n_steps - 1), first,
                  t0 + rec.t0, t1 + rec.t0, bool(reached))


def _queued(rec: Record) -> int:
    """Batches the workers queue: run.json's busiest DataLoader, else (a live view without
    it) the epochs' workers with the default prefetch of 2."""
    return rec.queued or 2 * max((int(e.get("workers") or 0) for e in rec.epochs), default=0)


def session_steady(session: Session, **limits: Any) -> dict[int | None, Steady | None] | None:
    """rank -> the steady window of its record (core/session/reader.Session.steady_by_rank's
    shape); None when the session has no record with steps (an older session: its events
    stand)."""
    ranks: list[int | None] = [*session.ranks] or [None]
    out: dict[int | None, Steady | None] = {}
    for rank in ranks:
        rec = load_record(session, rank if session.ranks else None)
        if rec is None or not rec.n_steps:
            return None
        out[rank] = record_steady(rec, **limits)
    return out
