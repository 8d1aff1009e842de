"""Per-step figures, the main thread's own time by cause, and the ceilings ("up to 1.9x faster
if the GPU never waited for data")."""

from __future__ import annotations

import numpy as np

from stallscope.core import causes
from stallscope.core import intervals as iv
from stallscope.core.analysis.idle import cause_totals, paint_causes
from stallscope.core.analysis.threads import Roles
from stallscope.core.report import Ceiling, DeviceStats, Step
from stallscope.core.trace import Trace


def host_split(base: np.ndarray, phases: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The main thread's time in `base` by host cause (gpu_wait never applies: no GPU op
    queued); codes index causes.CAUSES."""
    return paint_causes(base, {c: phases[c] for c in causes.HOST_CAUSES})


def host_base(trace: Trace, r: Roles) -> np.ndarray:
    """Step time (the union of the steps), else the window."""
    if len(r.steps):
        return iv.union(iv.as_intervals(trace.start[r.steps], trace.end[r.steps]))
    return np.array([[r.lo, r.hi]]) if r.hi > r.lo else iv.EMPTY


totals = cause_totals


def steps(trace: Trace, r: Roles, phases: dict[str, np.ndarray],
          devices: dict[int, DeviceStats], host: tuple[np.ndarray, np.ndarray]) -> list[Step]:
    idx = r.steps
    if len(idx) == 0:
        return []
    lo, hi = trace.start[idx], trace.end[idx]
    dl = iv.measure_in(phases["data_loading"], lo, hi)
    opt = iv.measure_in(phases["optimizer"], lo, hi)
    busy = {d: iv.measure_in(s.busy, lo, hi) for d, s in devices.items()}
    idle = {d: {c: iv.measure_in(s.spans_of(c), lo, hi) for c in causes.CAUSES}
            for d, s in devices.items()}
    comm = {d: iv.measure_in(s.comm, lo, hi) for d, s in devices.items()}
    exposed = {d: iv.measure_in(s.exposed_comm, lo, hi) for d, s in devices.items()}
    spans, codes = host
    host_in = {c: iv.measure_in(spans[codes == k], lo, hi)
               for k, c in enumerate(causes.CAUSES)}
    return [
        Step(name=trace.names[trace.name[i]], start_us=float(lo[k]), dur_us=float(trace.dur[i]),
             data_loading_us=float(dl[k]), optimizer_us=float(opt[k]),
             gpu_busy_us={d: float(b[k]) for d, b in busy.items()},
             idle_by_cause={d: {c: float(v[k]) for c, v in by.items()} for d, by in idle.items()},
             comm_us={d: float(v[k]) for d, v in comm.items()},
             exposed_comm_us={d: float(v[k]) for d, v in exposed.items()},
             host_by_cause={c: float(v[k]) for c, v in host_in.items()})
        for k, i in enumerate(idx)
    ]


def ceilings(steps_: list[Step], devices: dict[int, DeviceStats], window_us: float,
             host_by_cause: dict[str, float], host_base_us: float,
             device_kind: str = "GPU") -> list[Ceiling]:
    """Per device and cause: step time / (step time - the cause's idle inside the steps).
    Without steps the window stands for the step time; without a GPU, the main thread's step
    time by cause. Largest first; causes with no time are left out."""
    out = []
    if devices:
        for dev, stats in devices.items():
            if steps_:
                base = sum(s.dur_us for s in steps_)
                per = {c: sum(s.idle_by_cause[dev][c] for s in steps_) for c in causes.CAUSES}
            else:
                base, per = window_us, stats.idle_by_cause
            out += [_ceiling(dev, c, us, base, device_kind) for c, us in per.items() if us > 0]
    else:
        base = sum(s.dur_us for s in steps_) if steps_ else host_base_us
        out += [_ceiling(None, c, us, base) for c, us in host_by_cause.items() if us > 0]
    return sorted((c for c in out if c is not None), key=lambda c: (-c.speedup, c.cause))


def _ceiling(dev: int | None, cause: str, us: float, base: float,
             device_kind: str = "GPU") -> Ceiling | None:
    if base <= 0:
        return None
    rest = base - us
    # Sums of float µs at ~1e15 leave crumbs: a cause within 1e-6 of the base is all of it.
    speedup = base / rest if rest > 1e-6 * base else float("inf")
    return Ceiling(device=dev, cause=cause, cause_us=us, base_us=base, speedup=speedup,
                   device_kind=device_kind)
