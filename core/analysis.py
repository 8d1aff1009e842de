"""Why the GPU waits: busy/idle per device, idle charged to what the main thread was doing.

The definitions are DESIGN.md's "Analysis definitions"; names here match the CLI's JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stallscope.core import intervals as iv
from stallscope.core.causes import CAUSE_LABELS, CAUSES  # noqa: F401  (re-exported)
from stallscope.core.errors import StallscopeError
from stallscope.core.kineto import (
    CPU_OP_CATS,
    DATALOADER_PREFIXES,
    GPU_CATS,
    OPTIMIZER_PREFIX,
    SYNC_NAMES,
    Cat,
)
from stallscope.core.memory import MemoryStats, memory_by_device
from stallscope.core.trace import Trace

PAINTED = CAUSES[:-1]  # every cause but `uncovered`, the remainder; codes index CAUSES


@dataclass
class Step:
    name: str
    start_us: float
    dur_us: float
    data_loading_us: float
    optimizer_us: float
    gpu_busy_us: dict[str, float]

    def to_json(self) -> dict:
        return {"name": self.name, "start_us": self.start_us, "dur_us": self.dur_us,
                "data_loading_us": self.data_loading_us, "optimizer_us": self.optimizer_us,
                "gpu_busy_us": self.gpu_busy_us}


@dataclass
class DeviceStats:
    busy_us: float
    idle_us: float
    utilization: float
    idle_gaps: int
    idle_by_cause: dict[str, float]
    busy: np.ndarray          # (N, 2) disjoint busy intervals inside the window
    gaps: np.ndarray          # (M, 2) idle gaps
    cause_spans: np.ndarray   # (K, 2) idle pieces ...
    cause_codes: np.ndarray   # (K,) ... and their cause, an index into CAUSES

    def to_json(self) -> dict:
        return {"busy_us": self.busy_us, "idle_us": self.idle_us,
                "utilization": self.utilization, "idle_gaps": self.idle_gaps,
                "idle_by_cause": self.idle_by_cause}


@dataclass
class Advice:
    id: str
    title: str
    evidence: str
    fix: str
    cause: str | None = None
    focus: tuple[float, float] | None = None

    def to_json(self) -> dict:
        return {"id": self.id, "title": self.title, "evidence": self.evidence, "fix": self.fix}


@dataclass
class Report:
    trace: Trace
    window: tuple[float, float]
    main_track: int | None
    steps: list[Step]
    devices: dict[str, DeviceStats]
    phases: dict[str, np.ndarray]
    memory: dict[str, MemoryStats]
    advice: list[Advice] = field(default_factory=list)

    @property
    def window_us(self) -> float:
        return self.window[1] - self.window[0]

    @property
    def main_thread(self) -> tuple[str, str] | None:
        return None if self.main_track is None else self.trace.tracks[self.main_track]

    def worst_gap(self, cause: str, device: str | None = None) -> tuple[float, float] | None:
        """The longest idle piece charged to `cause` (on `device`, else on any device)."""
        code = CAUSES.index(cause)
        best = None
        for dev, stats in self.devices.items():
            if device is not None and dev != device:
                continue
            spans = stats.cause_spans[stats.cause_codes == code]
            if len(spans):
                k = int(np.argmax(spans[:, 1] - spans[:, 0]))
                if best is None or spans[k, 1] - spans[k, 0] > best[1] - best[0]:
                    best = (float(spans[k, 0]), float(spans[k, 1]))
        return best

    def to_json(self) -> dict:
        main = self.main_thread
        return {
            "trace": str(self.trace.path),
            "rank": self.trace.rank,
            "window_us": [self.window[0], self.window[1]],
            "main_thread": None if main is None else {"pid": main[0], "tid": main[1]},
            "steps": [s.to_json() for s in self.steps],
            "devices": {d: s.to_json() for d, s in self.devices.items()},
            "memory": {d: m.to_json() for d, m in self.memory.items()},
            "advice": [a.to_json() for a in self.advice],
            "dropped_events": dict(self.trace.dropped),
        }


def analyze(trace: Trace, device: int | str | None = None) -> Report:
    devices = trace.gpu_devices()
    if device is not None:
        if int(device) not in devices:
            have = ", ".join(map(str, devices)) or "none"
            raise StallscopeError(f"{trace.path}: no GPU activity on device {device} "
                                  f"(devices with activity: {have})")
        devices = [int(device)]
    step_idx = _step_events(trace)
    main = _main_track(trace, step_idx)
    lo, hi = _window(trace, step_idx)
    phases = _phases(trace, main, lo, hi)
    dev_stats = {str(d): _device_stats(trace, d, lo, hi, phases) for d in devices}
    step_windows = iv.as_intervals(trace.start[step_idx], trace.end[step_idx])
    report = Report(
        trace=trace, window=(lo, hi), main_track=main,
        steps=_steps(trace, step_idx, phases, dev_stats),
        devices=dev_stats, phases=phases,
        memory={d: m for d, m in memory_by_device(trace, devices, step_windows).items()
                if device is None or d == str(device)},
    )
    from stallscope.core.advice import advise  # advice reads the finished report

    report.advice = advise(report)
    return report


# ----------------------------------------------------------------------------- building blocks

def _step_events(trace: Trace) -> np.ndarray:
    return trace.step_indices()


def _main_track(trace: Trace, step_idx: np.ndarray) -> int | None:
    if len(step_idx):
        return int(trace.track[step_idx[0]])
    ops = np.flatnonzero(trace.cat == Cat.CPU_OP)
    if len(ops) == 0:
        return None
    busy = np.bincount(trace.track[ops], weights=trace.end[ops] - trace.start[ops])
    return int(np.argmax(busy))


def _window(trace: Trace, step_idx: np.ndarray) -> tuple[float, float]:
    if len(step_idx):
        last = step_idx[-1]
        return float(trace.start[step_idx[0]]), float(trace.end[last])
    if trace.n_events == 0:
        return 0.0, 0.0
    return float(trace.start.min()), float(trace.end.max())


def _phases(trace: Trace, main: int | None, lo: float, hi: float) -> dict[str, np.ndarray]:
    """Unions on the main thread, clipped to the window, one per cause but `uncovered`."""
    if main is None:
        return {c: iv.EMPTY for c in PAINTED}
    on_main = trace.track == main
    masks = {
        "data_loading": trace.mask_names(lambda n: n.startswith(DATALOADER_PREFIXES)),
        "sync": trace.mask_names(lambda n: n in SYNC_NAMES),
        "optimizer": trace.mask_names(lambda n: n.startswith(OPTIMIZER_PREFIX)),
        "cpu_ops": np.isin(trace.cat, np.array(CPU_OP_CATS, dtype=np.int8)),
    }
    phases = {cause: _union_of(trace, mask & on_main, lo, hi) for cause, mask in masks.items()}
    return {c: phases.get(c, iv.EMPTY) for c in PAINTED}


def _union_of(trace: Trace, mask: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return iv.union(iv.clip(iv.as_intervals(trace.start[mask], trace.end[mask]), lo, hi))


def _device_stats(trace: Trace, dev: int, lo: float, hi: float,
                  phases: dict[str, np.ndarray]) -> DeviceStats:
    gpu = np.isin(trace.cat, np.array(GPU_CATS, dtype=np.int8)) & (trace.device == dev)
    busy = _union_of(trace, gpu, lo, hi)
    busy_us = iv.length(busy)
    width = hi - lo
    idle_us = width - busy_us
    gaps = iv.gaps(busy, lo, hi)
    spans, codes = iv.paint(gaps, [phases[c] for c in PAINTED])
    lengths = spans[:, 1] - spans[:, 0]
    by_cause = {c: float(lengths[codes == k].sum()) for k, c in enumerate(PAINTED)}
    # The remainder keeps the causes adding up to idle_us exactly.
    by_cause["uncovered"] = max(idle_us - sum(by_cause.values()), 0.0)
    return DeviceStats(
        busy_us=busy_us, idle_us=idle_us, utilization=busy_us / width if width > 0 else 0.0,
        idle_gaps=len(gaps), idle_by_cause=by_cause, busy=busy, gaps=gaps,
        cause_spans=spans, cause_codes=codes)


def _steps(trace: Trace, step_idx: np.ndarray, phases: dict[str, np.ndarray],
           devices: dict[str, DeviceStats]) -> list[Step]:
    lo, hi = trace.start[step_idx], trace.end[step_idx]
    dl = iv.measure_in(phases["data_loading"], lo, hi)
    opt = iv.measure_in(phases["optimizer"], lo, hi)
    busy = {d: iv.measure_in(s.busy, lo, hi) for d, s in devices.items()}
    return [
        Step(name=trace.names[trace.name[i]], start_us=float(lo[k]), dur_us=float(trace.dur[i]),
             data_loading_us=float(dl[k]), optimizer_us=float(opt[k]),
             gpu_busy_us={d: float(b[k]) for d, b in busy.items()})
        for k, i in enumerate(step_idx)
    ]
