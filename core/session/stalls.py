"""The whole run's stalls, named with what they cost: epoch-start pauses (DataLoader workers
re-created), checkpoint saves, validation, time between steps, steps slowing down.

    run = analyze_run(record)        # core/session/record.Record -> RunReport
    run.to_json()                    # the `run` section of `stallscope-cli analyze --json`

Each stall carries `cost_s` (the wall time it takes over the run) and `saving_s` (what the named
fix wins back; 0 where there is no single fix).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from stallscope.core.session.record import Record
from stallscope.core.session.whole_run import (
    main_loader,
    record_steady,
    run_clock,
    training_epochs,
)
from stallscope.core.units import duration, pct, plural

MIN_SHARE = 0.01        # a stall under 1% of the run is not named
EPOCH_PAUSE_STEPS = 2.0  # an epoch start counts as a pause when it takes > 2 median steps
EPOCH_PAUSE_MS = 100.0   # ... and at least this long
SLOWDOWN = 0.2          # the last tenth of the run 20% slower than the first


@dataclass
class Stall:
    id: str
    title: str
    evidence: str
    cost_s: float
    saving_s: float = 0.0
    share: float = 0.0


@dataclass
class RunReport:
    steps: int
    wall_s: float             # the record's clock: the runner's start to the last step's end
    median_step_ms: float     # the stalls' yardstick ("a step takes ... (median)")
    # the steady statistic (core/session/steady.py) over the whole run after its warm-up:
    # data wait summed over the steady steps, epoch starts included, over their elapsed time
    data_wait_share: float
    epochs: int
    saves: int
    first_full: int
    record_bytes: int
    step_ms: float = float("nan")
    steady_steps: int = 0
    startup_s: float = 0.0    # the runner's start to step 0's end (imports, set-up, step 0)
    elapsed_s: float = 0.0    # step 0's end to the last step's end (wall_s - startup_s)
    steps_only_wait_share: float = 0.0  # the same share with every epoch start left out
    steady_reached: bool = False
    steady_note: str = ""
    steady_profiled: int = 0  # steps of the steady figure the profiler recorded (a short run)
    lineprof: bool = False    # line-profiled: its cost is in every figure (record.lineprof)
    windows: list[dict] = field(default_factory=list)
    stalls: list[Stall] = field(default_factory=list)

    def to_json(self) -> dict:
        """Plain JSON (NaN, where a figure was never recorded, becomes null)."""
        out = asdict(self)
        out["stalls"] = [asdict(s) for s in self.stalls]
        return {k: None if isinstance(v, float) and not np.isfinite(v) else v
                for k, v in out.items()}


def _num(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else 0.0


def s_text(seconds: float) -> str:
    """A stretch of the run: "455.48 ms", "3.90 s", "5.9 min", "3.1 h"."""
    if seconds >= 7200:
        return f"{seconds / 3600:,.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:,.1f} min"
    return duration(seconds * 1e6)


def analyze_run(rec: Record) -> RunReport:
    clock = run_clock(rec)
    wall_ms = 1e3 * clock.wall_s
    med = rec.median_step_ms()
    w = record_steady(rec)
    run = RunReport(
        steps=rec.n_steps, wall_s=clock.wall_s, median_step_ms=med,
        data_wait_share=w.data_wait_share if w else 0.0,
        epochs=len(training_epochs(rec)), saves=len(rec.saves), first_full=rec.first_full,
        record_bytes=rec.nbytes, step_ms=w.step_ms if w else float("nan"),
        steady_steps=w.steps if w else 0, startup_s=clock.startup_s, elapsed_s=clock.elapsed_s,
        steps_only_wait_share=w.steps_only_share if w else 0.0,
        steady_reached=w.reached if w else False, steady_note=w.note if w else "",
        steady_profiled=w.profiled if w else 0, lineprof=rec.lineprof,
        windows=[{"steps": [w.first, w.last], "trace": w.trace} for w in rec.windows])
    if wall_ms <= 0:
        return run
    found = [f(rec, wall_ms, med) for f in (_epoch_starts, _saves, _validation, _between,
                                            _slowdown)]
    run.stalls = sorted((s for s in found if s is not None and s.share >= MIN_SHARE),
                        key=lambda s: -max(s.saving_s, s.cost_s))
    return run


def _epoch_starts(rec: Record, wall_ms: float, med: float) -> Stall | None:
    epochs = training_epochs(rec)
    if len(epochs) < 2:
        return None
    # the pause: the last epoch's end (workers shut down) and this one's first batch
    first = np.array([float(e.get("first_batch_ms") or 0.0) + float(e.get("previous_end_ms") or 0)
                      for e in epochs])
    later = first[1:]
    typical = float(np.nanmedian(rec.steps["data_wait_ms"])) if len(rec.steps) else 0.0
    pause = float(np.mean(later))
    if not np.isfinite(med) or pause < max(EPOCH_PAUSE_STEPS * med, EPOCH_PAUSE_MS):
        return None
    cost = float(np.sum(np.maximum(later - typical, 0.0))) / 1e3  # epoch 0 pays it anyway
    last = epochs[-1]
    workers = int(last.get("workers") or 0)
    site = str(last.get("site", "?"))
    title = f"each epoch starts with a {s_text(pause / 1e3)} pause"
    saving = 0.0
    if workers > 0 and not last.get("persistent_workers"):
        each = max(0.0, pause - typical) / 1e3
        saving = each * len(later)
        title += (f" while {plural(workers, 'worker')} start{'s' if workers == 1 else ''}: "
                  "persistent_workers=True saves "
                  f"{s_text(each)} x {len(later)} epochs = {s_text(saving)}")
    elif workers > 0:
        title += " (persistent workers already: the Dataset or sampler's set-up?)"
    evidence = (f"DataLoader {site}: {len(epochs)} epochs, first batch after "
                f"{s_text(first[0] / 1e3)} in epoch 0 and {s_text(pause / 1e3)} on average "
                f"later; a step takes {duration(med * 1e3)} (median)")
    return Stall("epoch_start", title, evidence, cost, saving, cost * 1e3 / wall_ms)


def _saves(rec: Record, wall_ms: float, med: float) -> Stall | None:
    if not rec.saves:
        return None
    ms = np.array([float(e.get("ms") or 0.0) for e in rec.saves])
    total = max(float(rec.total("save_ms")) + _num(rec.tail.get("save_ms")), float(ms.sum()))
    n = np.array([int(e.get("n") or 0) for e in rec.saves])
    every = f" every {int(np.median(np.diff(n))):,} steps" if len(n) > 1 and \
        np.median(np.diff(n)) > 0 else ""
    share = total / wall_ms
    title = (f"checkpoint saves: {s_text(float(np.mean(ms)) / 1e3)}{every} "
             f"({pct(share)} of the run)")
    evidence = (f"{plural(len(rec.saves), 'torch.save call')} took {s_text(total / 1e3)} "
                f"in all")
    return Stall("checkpoint", title, evidence, total / 1e3, 0.0, share)


def _validation(rec: Record, wall_ms: float, med: float) -> Stall | None:
    """Other loaders before a step's own batch (optimizer steps), and after the last step:
    time no step's data wait holds (capture/record.py takes those fetches out of it). Stepping
    per batch, another loader's batches are steps of their own: their time is step time and
    data wait, never validation as well (docs/definitions.md, "Steps")."""
    main = main_loader(rec)
    if main is None:
        return None
    cost = rec.total("other_ms") + _num(rec.tail.get("other_ms"))
    if cost <= 0:
        return None
    sites = [site for i, site in sorted(rec.loaders.items()) if i != main]
    share = cost / wall_ms
    title = f"validation: {pct(share)} of wall time"
    evidence = (f"time in {'DataLoader ' + ', '.join(sites) if sites else 'other DataLoaders'}"
                f" between training steps: {s_text(cost / 1e3)}")
    return Stall("validation", title, evidence, cost / 1e3, 0.0, share)


def _between(rec: Record, wall_ms: float, med: float) -> Stall | None:
    gap = rec.total("gap_ms") - rec.total("other_ms") - rec.total("save_ms")
    if gap <= 0:
        return None
    share = gap / wall_ms
    return Stall("between_steps", f"time between steps: {pct(share)} of wall time",
                 f"{s_text(gap / 1e3)} after one step ended and before the next batch was "
                 "asked for, outside DataLoaders and torch.save (logging, metrics, evaluation "
                 "code)", gap / 1e3, 0.0, share)


def _slowdown(rec: Record, wall_ms: float, med: float) -> Stall | None:
    x = rec.overview(200)
    mean = x["wall_mean"]
    if len(mean) < 20:
        return None
    tenth = max(2, len(mean) // 10)
    early = float(np.median(mean[1:tenth + 1]))
    late = float(np.median(mean[-tenth:]))
    if early <= 0 or late < early * (1 + SLOWDOWN):
        return None
    cost = (late - early) / 2 * rec.n_steps / 1e3  # the excess grows over the run: half
    return Stall("slowdown", f"steps got slower: {duration(early * 1e3)} early in the run, "
                 f"{duration(late * 1e3)} at the end (+{pct(late / early - 1, 0)})",
                 "a leak (growing lists, tensors kept with their graph), fragmentation or a "
                 "filling cache; the memory lines in the run view show which",
                 cost, 0.0, cost * 1e3 / wall_ms)
