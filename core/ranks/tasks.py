"""One rank as one independent task: load its trace, analyse it, return a small summary.

`analyze_rank(path, label)` is what a process-pool worker or a Dask worker runs. It never raises
for a bad file: a `RankFailure` names the file and the problem, so one broken rank does not stop
a 128-rank job. The summary holds plain numbers only (it pickles in microseconds): the Report's
JSON (figures per step and device, idle by cause, exposed communication, advice with saving_us)
and, for the straggler table, each step's collectives on the rank's communication device with
the end of the compute that preceded each (see core/ranks/stragglers.py for the definition).
The full Trace is dropped when the task returns; the app loads it again for the rank it opens.
"""

from __future__ import annotations

import gc
import os
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from stallscope.core.causes import CAUSES
from stallscope.core.compare import step_ms
from stallscope.core.document import analyze_path
from stallscope.core.errors import StallscopeError
from stallscope.core.kineto import GPU_CATS, is_comm_name
from stallscope.core.report import Report, device_json
from stallscope.core.trace import Trace


@dataclass
class Collective:
    """One communication kernel inside a step, on the rank's communication device."""

    name: str
    start_us: float
    end_us: float
    compute_end_us: float  # the arrival: end of the preceding non-comm GPU work, at most start

    def to_json(self) -> dict:
        return {"name": self.name, "start_us": self.start_us, "end_us": self.end_us,
                "compute_end_us": self.compute_end_us}


@dataclass
class StepTiming:
    name: str
    start_us: float
    end_us: float
    compute_us: float                   # non-comm GPU busy time in the step (busy - exposed comm)
    idle_by_cause: dict[str, float]     # the device's idle in the step, by cause
    collectives: list[Collective] = field(default_factory=list)


@dataclass
class RankSummary:
    label: str
    path: str
    rank: int | None
    world_size: int | None
    device: int | None                  # the device whose collectives are compared
    report: dict                        # Report.to_json()
    steps: list[StepTiming]
    mean_step_ms: float = 0.0

    @property
    def key(self) -> str:
        return self.label or Path(self.path).name

    def step_ms(self) -> float:
        """Mean step time, or the window without steps (compare.step_ms of the Report)."""
        return self.mean_step_ms

    def device_json(self) -> dict | None:
        dev: dict | None = self.report["devices"].get(device_json(self.device))
        return dev

    def largest_cause(self) -> str | None:
        """The idle cause holding the most of the compared device's idle time."""
        dev = self.device_json()
        if dev is None or dev["idle_us"] <= 0:
            return None
        by = dev["idle_by_cause"]
        cause = max(CAUSES, key=lambda c: by.get(c, 0.0))
        return cause if by.get(cause, 0.0) > 0 else None

    def to_json(self) -> dict:
        """The Report's JSON with the rank's label, world size and compared device."""
        out = dict(self.report)
        out.update({"label": self.label, "world_size": self.world_size,
                    "comm_device": device_json(self.device)})
        return out


@dataclass
class RankFailure:
    label: str
    path: str
    message: str

    def to_json(self) -> dict:
        return {"label": self.label, "path": self.path, "reason": self.message}


def analyze_rank(path: str, label: str = "",
                 device: int | None = None) -> RankSummary | RankFailure:
    """The task: never raises for a bad trace (a RankFailure says why). `device`: only that
    GPU (as `analyze --device`)."""
    try:
        return summarize(analyze_path(path, device), label)
    except StallscopeError as exc:
        return RankFailure(label, str(path), str(exc))
    except MemoryError:
        return RankFailure(label, str(path), f"{path}: out of memory while analysing (pid "
                                             f"{os.getpid()})")
    except Exception as exc:  # noqa: BLE001 - a bug in one rank must not end the whole job
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return RankFailure(label, str(path), f"{path}: internal error: {type(exc).__name__}: "
                                             f"{exc} ({Path(where.filename).name}:{where.lineno})")
    finally:
        gc.collect()  # the Trace's cycles (if any) go before the next task loads its own


def summarize(report: Report, label: str = "") -> RankSummary:
    trace = report.trace
    device = comm_device(report)
    steps = step_timings(report, device)
    return RankSummary(label=label, path=str(trace.path), rank=trace.rank,
                       world_size=trace.world_size, device=device, report=report.to_json(),
                       steps=steps, mean_step_ms=step_ms(report))


def comm_device(report: Report) -> int | None:
    """The device with the most communication time; without any, the busiest device; on a
    tie the lowest id."""
    if not report.devices:
        return None
    return max(report.devices, key=lambda d: (report.devices[d].comm_us,
                                              report.devices[d].busy_us, -d))


def step_timings(report: Report, device: int | None) -> list[StepTiming]:
    """Per step: compute, idle by cause and the collectives on `device`."""
    if device is None:
        return [StepTiming(s.name, s.start_us, s.start_us + s.dur_us, 0.0, {})
                for s in report.steps]
    trace = report.trace
    names, start, end, ready = _collectives(trace, device)
    out = []
    for s in report.steps:
        lo, hi = s.start_us, s.start_us + s.dur_us
        compute = s.gpu_busy_us.get(device, 0.0) - s.exposed_comm_us.get(device, 0.0)
        k0, k1 = np.searchsorted(start, [lo, hi], side="left")
        colls = [Collective(trace.names[names[k]], float(start[k]), float(end[k]),
                            float(ready[k])) for k in range(k0, k1)]
        idle = {c: float(v) for c, v in s.idle_by_cause.get(device, {}).items()}
        out.append(StepTiming(s.name, float(lo), float(hi), float(max(compute, 0.0)), idle,
                              colls))
    return out


def _collectives(trace: Trace, dev: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Comm kernels on `dev` (name ids, start, end) in start order, and each one's arrival:
    min(start, latest end of the non-comm GPU ops on `dev` that started before it), or its
    start when no such op exists."""
    gpu = np.isin(trace.cat, np.array(GPU_CATS, dtype=np.int8)) & (trace.device == dev)
    gpu &= trace.dur > 0
    comm = gpu & trace.mask_names(is_comm_name)
    other = gpu & ~comm
    c = np.flatnonzero(comm)
    o = np.flatnonzero(other)
    start, end = trace.start[c], trace.end[c]
    ready = start.copy()
    if len(o):
        o_start = trace.start[o]                      # trace columns are sorted by start
        latest = np.maximum.accumulate(trace.end[o])  # latest end among ops started so far
        k = np.searchsorted(o_start, start, side="left") - 1
        has = k >= 0
        ready[has] = np.minimum(start[has], latest[k[has]])
    return trace.name[c], start, end, ready
