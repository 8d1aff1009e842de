"""The steady statistic of a run's steps: the one step time tune, compare, the compare view and the
run summary all state (issue 21).

Time per step is elapsed wall time over a run of consecutive steady steps divided by their
count (event times, so the gaps between steps count too), not a median of a few steps. Steady
starts after a warm-up: the last pause the workers could fill their queue in (the profiling
window, whose trace is written after its last step, or the start-up in step 0), then as many
batches as the queue holds (num_workers x prefetch_factor) and `SETTLE_STEPS` more. With
workers those queued batches arrive at once; a median over a few steps right after a pause
lands on them (46x "faster" for a loader that can at most double). Data wait the same way:
summed wait over the same steps; its share is summed wait over elapsed time, epoch starts
included: the pause before an epoch's first batch (workers started, the last epoch's shut down)
that falls between two steps counts as data wait too (`Steady.steps_only_share` leaves every
epoch start out). Steps are counted by their numbers, so a long run's thinned step events still
count every step; a session's record.bin (core/session/record.py) holds every step and is
preferred over the events.

A window is *reached* when it holds at least `MIN_STEPS` steps over at least `MIN_S` seconds,
or `LONG_S` seconds of at least `LONG_STEPS` steps (slow steps); else the figures stand with a
note that the run was too short to reach steady state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from stallscope.core.units import plural

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
    epoch_ms: float = 0.0        # epoch starts in the window: their pause outside the steps
    epoch_fetch_ms: float = 0.0  # ... and their first fetch and the last epoch's end (inside)
    profiled: int = 0         # steps in it the profiler recorded (a run too short for more)

    @property
    def steps_only_share(self) -> float:
        """The data wait share with every epoch start left out (steady steps only)."""
        if self.seconds <= 0:
            return 0.0
        wait = self.data_wait_ms * self.steps - self.epoch_ms - self.epoch_fetch_ms
        return min(1.0, max(0.0, wait / (1e3 * self.seconds)))

    @property
    def short_text(self) -> str:
        """'27.1 ms per step, data wait 5.7 ms (21%, incl. epoch starts) over 40 steady
        steps (3.1 s)'."""
        return (f"{self.step_ms:.1f} ms per step, data wait {self.data_wait_ms:.1f} ms "
                f"({100 * self.data_wait_share:.0f}%, incl. epoch starts) over {self.steps:,} "
                f"steady step{'s' if self.steps != 1 else ''} ({self.seconds:.1f} s)")


def short_text(reached: bool, profiled: int = 0) -> str:
    """What a window too short for steady state adds to its figure ("" once reached): ' (too
    short to reach steady state; 5 of them profiled: the profiler's cost is in it)'."""
    if reached:
        return ""
    return (" (too short to reach steady state" + (
        f"; {profiled} of them profiled: the profiler's cost is in it" if profiled else "")
        + ")")


LINEPROF_NOTE = ("line profiling was on (--lineprof): its cost is in these figures; run "
                 "without it for the script's own step time")


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
           min_s: float = MIN_S, n: np.ndarray | None = None,
           epochs: Sequence[dict] = (), span_steps: np.ndarray | None = None,
           span_wait_ms: np.ndarray | None = None) -> Steady | None:
    """The steady window of one rank's steps (columns as core/session/reader.Steps holds).
    `n`: the steps' numbers (rows may skip steps: a long run's thinned events); `epochs`: the
    training loader's epoch starts (core/capture/record.py's `epoch` events); `span_steps`,
    `span_wait_ms`: per row, the steps it stands for and their summed wait (NaN: itself only)."""
    k = len(wall_ms)
    if k == 0:
        return None
    start = warmup_end(phase, batches, queued)
    note = ""
    profiled = 0
    if k - start < 2:  # too short: whatever follows step 0 (start-up) stands, said as such
        pauses = [i for i, p in enumerate(phase) if p in PROFILED]
        if k >= min_steps and pauses and pauses[-1] >= 1:
            # many steps, but a profiling window near the end (--profile-every): the steady
            # figure starts after the last one
            after = plural(k - 1 - pauses[-1], "step")
            note = (f"only {after} after the last profiling window: too short to reach steady "
                    f"state (it needs the warm-up after that window, then {min_steps} steps "
                    f"over {min_s:.0f} s)")
        else:
            note = (f"only {k} steps: too short to reach steady state (it needs the warm-up, "
                    f"then {min_steps} steps over {min_s:.0f} s)")
        start = 1 if k > 2 else 0
        # the profiled window's steps, then: their mean is the profiler's as much as the
        # script's (docs/definitions.md: never labelled as the step time)
        profiled = sum(1 for p in phase[start:] if p in PROFILED)
        if profiled:
            note += (f"; {profiled} of the {k - start} steps profiled: the profiler's cost is "
                     "in the figure")
    wait = np.nan_to_num(np.asarray(data_wait_ms[start:], dtype=float))
    numbers = np.arange(k, dtype=float) if n is None else np.asarray(n, dtype=float)
    if not np.isfinite(numbers).all():  # a step event without its number (a hostile session)
        numbers = np.arange(k, dtype=float)
    count = int(numbers[k - 1] - (numbers[start - 1] if start > 0 else numbers[0] - 1))
    count = count if count >= k - start else k - start  # numbers that run backwards: rows
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
    if span_steps is not None and span_wait_ms is not None:
        span_steps = np.asarray(span_steps, dtype=float)[start:]
        span_wait_ms = np.asarray(span_wait_ms, dtype=float)[start:]
    waited = covered_wait(wait, count, span_steps, span_wait_ms)
    found = window(count, seconds, waited, epoch_waits(epochs, numbers[start], numbers[k - 1]),
                   start, t0, t1, reached, note)
    return replace(found, profiled=profiled) if profiled else found


def covered_wait(wait: np.ndarray, count: int, span_steps: np.ndarray | None = None,
                 span_wait_ms: np.ndarray | None = None) -> float:
    """The summed data wait of `count` steps from the rows recorded of them: a row standing for
    steps left out (span_steps > 1: a long run's thinned step lines) adds their summed wait,
    and the mean per step covered stands for any step no row covers."""
    if not len(wait):
        return 0.0
    steps, waits = np.ones(len(wait)), np.array(wait, dtype=float)
    if span_steps is not None and span_wait_ms is not None:
        ok = np.isfinite(span_steps) & (span_steps >= 1) & np.isfinite(span_wait_ms)
        steps[ok], waits[ok] = span_steps[ok], span_wait_ms[ok]
    return float(waits.sum() / steps.sum()) * count


def epoch_waits(epochs: Sequence[dict], first: float, last: float) -> tuple[float, float]:
    """(pause outside the steps, time inside them) of the epoch starts fed to steps
    first..last: an epoch's first batch waits on its iterator's creation (workers started)
    between steps, then on its first fetch and the last epoch's end (StopIteration, workers shut
    down) inside the step's data wait."""
    outside = inside = 0.0
    for e in epochs:
        if first <= _num(e.get("n")) <= last:
            fetch = _num(e.get("fetch_ms"))
            outside += max(0.0, _num(e.get("first_batch_ms")) - fetch)
            inside += fetch + _num(e.get("previous_end_ms"))
    return outside, inside


def window(steps: int, seconds: float, waited_ms: float, epochs: tuple[float, float],
           first: int, t0: float, t1: float, reached: bool, note: str = "") -> Steady:
    """A Steady from its sums: `waited_ms` the steps' summed data wait, `epochs` what
    epoch_waits gives for them."""
    outside, inside = epochs
    total = waited_ms + outside
    return Steady(1e3 * seconds / steps if steps else float("nan"),
                  total / steps if steps else float("nan"),
                  min(total / (1e3 * seconds), 1.0) if seconds > 0 else 0.0, steps, seconds,
                  first, t0, t1, reached, note, outside, min(inside, waited_ms))


def _num(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        and np.isfinite(value) else 0.0


def training_epochs(epochs: list[dict], loaders: list[dict]) -> list[dict]:
    """The epoch starts of the training loader: run.json's busiest one, by its call site (the
    first loader iterated when run.json names none)."""
    site = busiest_loader(loaders).get("site")
    if site is not None:
        return [e for e in epochs if e.get("site") == site]
    return [e for e in epochs if e.get("loader") == 0]


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
                         data_wait_share=waits.data_wait_share, epoch_ms=waits.epoch_ms,
                         epoch_fetch_ms=waits.epoch_fetch_ms)
