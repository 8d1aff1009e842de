"""The steady statistic of a run's steps: the one step time tune, compare, the compare view and the
run summary all state (issue 21).

Time per step is elapsed wall time over a run of consecutive steady steps divided by their
count (event times, so the gaps between steps count too), not a median of a few steps. Steady
starts after a warm-up: the last pause the workers could fill their queue in (the profiling
window, whose trace is written after its last step, or the start-up in step 0), then as many
batches as the queue holds (num_workers x prefetch_factor) and `SETTLE_STEPS` more. With
workers those queued batches arrive at once; a median over a few steps right after a pause
lands on them (46x "faster" for a loader that can at most double). Data wait the same way:
summed wait over the same steps; its share is summed wait over elapsed time.

A window is *reached* when it holds at least `MIN_STEPS` steps over at least `MIN_S` seconds,
or `LONG_S` seconds of at least `LONG_STEPS` steps (slow steps); else the figures stand with a
note that the run was too short to reach steady state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

MIN_STEPS = 20
MIN_S = 2.0
LONG_S = 8.0        # slow steps: this long a window is enough with LONG_STEPS of them
LONG_STEPS = 8
SETTLE_STEPS = 3
PROFILED = ("warmup", "active")  # a trace is written after the last of these (a pause)
STATISTIC = "steady mean (elapsed over the steady steps / their count)"


@dataclass(frozen=True)
class Steady:
    step_ms: float            # elapsed wall time / steps
    data_wait_ms: float       # summed data wait / steps
    data_wait_share: float    # summed data wait / elapsed
    steps: int
    seconds: float
    first: int                # index of the first step in the window (0-based)
    t0: float                 # event time the window starts at (the step before it ended)
    t1: float                 # event time of its last step
    reached: bool
    note: str = ""

    @property
    def short_text(self) -> str:
        """'27.1 ms per step, data wait 5.7 ms (21%) over 40 steady steps (3.1 s)'."""
        return (f"{self.step_ms:.1f} ms per step, data wait {self.data_wait_ms:.1f} ms "
                f"({100 * self.data_wait_share:.0f}%) over {self.steps} steady step"
                f"{'s' if self.steps != 1 else ''} ({self.seconds:.1f} s)")


def busiest_loader(loaders: list[dict]) -> dict:
    """Of run.json's DataLoaders, the one that served the most batches (the first of equals):
    the one the steps drew from, that tune tunes and the advice names; {} without any."""
    loaders = [d for d in loaders if isinstance(d, dict)]
    if not loaders:
        return {}
    return max(loaders, key=lambda d: (int(d.get("batches") or 0), -loaders.index(d)))


def queued_batches(loaders: list[dict]) -> int:
    """Batches the workers of the loader that served the most can queue: workers x prefetch."""
    eff = busiest_loader(loaders).get("effective") or {}
    workers = int(eff.get("num_workers") or 0)
    return workers * int(eff.get("prefetch_factor") or 2) if workers else 0


def warmup_end(phase: list[str], batches: np.ndarray, queued: int) -> int:
    """Index of the first steady step: past the last pause, the queued batches and a few
    steps. May be len(phase) (no steady step yet)."""
    pauses = [i for i, p in enumerate(phase) if p in PROFILED]
    pause = pauses[-1] if pauses else 0
    after = np.nan_to_num(np.asarray(batches, dtype=float)[pause + 1:], nan=1.0)
    drained = int(np.searchsorted(np.cumsum(after), queued)) + 1 if queued > 0 else 0
    return pause + 1 + drained + SETTLE_STEPS


def steady(t: np.ndarray, wall_ms: np.ndarray, data_wait_ms: np.ndarray, batches: np.ndarray,
           phase: list[str], queued: int = 0, min_steps: int = MIN_STEPS,
           min_s: float = MIN_S) -> Steady | None:
    """The steady window of one rank's steps (columns as core/session/reader.Steps holds)."""
    k = len(wall_ms)
    if k == 0:
        return None
    start = warmup_end(phase, batches, queued)
    note = ""
    if k - start < 2:  # too short: whatever follows step 0 (start-up) stands, said as such
        start = 1 if k > 2 else 0
        note = (f"only {k} steps: too short to reach steady state (it needs the warm-up, "
                f"then {min_steps} steps over {min_s:.0f} s)")
    wait = np.nan_to_num(np.asarray(data_wait_ms[start:], dtype=float))
    count = k - start
    t = np.asarray(t, dtype=float)
    t0, t1 = (float(t[start - 1]), float(t[k - 1])) if start > 0 else (np.nan, np.nan)
    if np.isfinite(t0) and np.isfinite(t1) and t1 > t0:
        seconds = t1 - t0
    else:  # no event before the window (or no times): the steps' own walls
        seconds = float(np.nansum(wall_ms[start:])) / 1e3
        t1 = float(t[k - 1]) if np.isfinite(t[k - 1]) else 0.0
        t0 = t1 - seconds
    reached = bool(not note and ((count >= min_steps and seconds >= min_s)
                                 or (count >= LONG_STEPS and seconds >= LONG_S)))
    if not note and not reached:
        note = (f"only {count} steady steps over {seconds:.1f} s after the warm-up: too short "
                f"to reach steady state ({min_steps} steps over {min_s:.0f} s)")
    step_ms = 1e3 * seconds / count if count else float("nan")
    wait_ms = float(wait.sum()) / count if count else float("nan")
    share = float(wait.sum()) / (1e3 * seconds) if seconds > 0 else 0.0
    return Steady(step_ms, wait_ms, min(share, 1.0), count, seconds, start, t0, t1, reached,
                  note)


def slowest(windows: dict[int | None, Steady | None]) -> tuple[int | None, Steady] | None:
    """(rank, window) of a run: the slowest rank's window (its step paces all ranks: they wait
    for it in the all-reduce), with the data wait of the rank that waits most for its data
    (what holds them back); None when no rank has steps."""
    have = [(rank, w) for rank, w in windows.items() if w is not None]
    if not have:
        return None
    rank, w = max(have, key=lambda rw: rw[1].step_ms)
    waits = max((w for _, w in have), key=lambda w: w.data_wait_share)
    return rank, replace(w, data_wait_ms=waits.data_wait_ms,
                         data_wait_share=waits.data_wait_share)
