"""What an analysis hands to every consumer: the Report and its parts (docs/definitions.md,
"The JSON").

core.analysis fills it, core.advice reads it to write cards and headlines, and the renderers
(core/render: text, markdown, facts, tagline; the GUI) draw it. This module computes nothing, so
neither analysis nor advice imports the other's internals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from stallscope.core import causes
from stallscope.core import intervals as iv
from stallscope.core.causes import BY_CODE
from stallscope.core.memory import MemoryStats
from stallscope.core.trace import Trace
from stallscope.core.units import duration

V = TypeVar("V")


@dataclass
class Step:
    name: str
    start_us: float
    dur_us: float
    data_loading_us: float
    optimizer_us: float
    gpu_busy_us: dict[int, float]
    idle_by_cause: dict[int, dict[str, float]] = field(default_factory=dict)  # {dev: {cause: us}}
    comm_us: dict[int, float] = field(default_factory=dict)
    exposed_comm_us: dict[int, float] = field(default_factory=dict)
    host_by_cause: dict[str, float] = field(default_factory=dict)  # the main thread's step time

    @property
    def comm_overlap(self) -> dict[int, float]:
        return {d: _overlap(c, self.exposed_comm_us.get(d, 0.0)) for d, c in self.comm_us.items()}

    def to_json(self) -> dict:
        return {"name": self.name, "start_us": self.start_us, "dur_us": self.dur_us,
                "data_loading_us": self.data_loading_us, "optimizer_us": self.optimizer_us,
                "gpu_busy_us": by_device_json(self.gpu_busy_us),
                "idle_by_cause": by_device_json(self.idle_by_cause),
                "comm_us": by_device_json(self.comm_us),
                "exposed_comm_us": by_device_json(self.exposed_comm_us),
                "comm_overlap": by_device_json(self.comm_overlap),
                "host_by_cause": self.host_by_cause}


@dataclass
class DeviceStats:
    busy_us: float
    idle_us: float
    utilization: float
    idle_gaps: int
    idle_by_cause: dict[str, float]
    busy: np.ndarray          # (N, 2) disjoint busy intervals inside the window
    gaps: np.ndarray          # (M, 2) idle gaps
    cause_spans: np.ndarray   # (K, 2) idle pieces, sorted, covering `gaps` exactly ...
    cause_codes: np.ndarray   # (K,) ... and their cause, an index into causes.CAUSES
    python_by_annotation: dict[str, float] = field(default_factory=dict)
    comm_us: float = 0.0
    exposed_comm_us: float = 0.0
    comm: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))  # nccl/rccl union
    exposed_comm: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))  # ... bare
    launch_tracks: list[int] = field(default_factory=list)  # L(d): indexes into trace.tracks
    helper_busy: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    # ^ union of ops/runtime calls on the launching threads other than the main thread

    @property
    def comm_overlap(self) -> float:
        return _overlap(self.comm_us, self.exposed_comm_us)

    def spans_of(self, cause: str) -> np.ndarray:
        spans: np.ndarray = self.cause_spans[self.cause_codes == causes.index(cause)]
        return spans

    def to_json(self, trace: Trace | None = None) -> dict:
        out = {"busy_us": self.busy_us, "idle_us": self.idle_us,
               "utilization": self.utilization, "idle_gaps": self.idle_gaps,
               "idle_by_cause": self.idle_by_cause,
               "python_by_annotation": self.python_by_annotation,
               "comm_us": self.comm_us, "exposed_comm_us": self.exposed_comm_us,
               "comm_overlap": self.comm_overlap}
        if trace is not None:
            out["launching_threads"] = [{"pid": trace.tracks[t][0], "tid": trace.tracks[t][1]}
                                        for t in self.launch_tracks]
        return out


@dataclass
class Culprit:
    """An event (or a Python frame) that covers part of a cause's idle time: which op, runtime
    call, annotation or collective it was, how many of them, the idle they cover, and the
    user's innermost Python frame that called it ("train.py(45): step"; "" without stacks)."""

    name: str
    kind: str           # "op", "runtime", "annotation", "gpu_op", "collective", "frame"
    count: int
    covered_us: float
    frame: str = ""
    detail: str = ""    # a clause for the card: "issued by aten::item", "launches 96 kernels..."

    @property
    def text(self) -> str:
        """"aten::to ×78, 84.73 ms: mostly in cudaMemcpyAsync; at train.py(45): step"."""
        detail = f": {self.detail}" if self.detail else ""
        frame = (";" if self.detail else ":") + f" at {self.frame}" if self.frame else ""
        name = self.name if len(self.name) <= 90 else self.name[:87] + "..."
        return f"{name} ×{self.count:,}, {duration(self.covered_us)}{detail}{frame}"

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "count": self.count,
                "covered_us": self.covered_us, "frame": self.frame, "detail": self.detail}


@dataclass
class WindowFinding:
    """What the window is when it is not steady training (start-up, a graph capture, work
    queued before it, one step, a tail cut by the profiler's stop): its one card."""

    kind: str           # one of WINDOW_KINDS but "steady"
    title: str
    evidence: str
    fix: str
    culprits: list[Culprit] = field(default_factory=list)  # the one-off parts, with their cost


WINDOW_KINDS = ("steady", "startup", "graph_capture", "queued_before", "one_step", "tail_cut")


@dataclass
class Lack:
    """What the trace did not record enough of to judge (docs/definitions.md "Lacks"). One
    that `withholds` leaves no cause card or ceiling standing: its own card says why."""

    id: str             # too_short, no_cpu_ops, range_profiler, kernels_filtered, uncovered
    text: str
    fix: str = ""
    withholds: bool = False

    def to_json(self) -> dict:
        return {"id": self.id, "text": self.text, "withholds": self.withholds}


@dataclass
class CollectiveWait:
    """The main thread's `python` time (on `device`, or its step time without a GPU) during
    which collectives ran on other threads: communication, not Python."""

    device: int | None
    us: float                       # python time overlapped by collectives
    python_us: float                # the python time it is part of
    by_name: dict[str, float]       # collective name -> overlapped µs, largest first
    threads: list[tuple[str, str]]  # (pid, tid) of the threads that ran them


@dataclass
class Advice:
    """One card: what fired, its numbers, the fix, and the idle time it could win back."""

    id: str
    title: str
    evidence: str
    fix: str
    cause: str | None = None
    focus: tuple[float, float] | None = None  # the span a click on the card jumps to
    saving_us: float = 0.0
    minor: bool = False                        # worth < 1% of the window: never the top card
    device: int | None = None
    culprits: list[Culprit] = field(default_factory=list)  # what covers its idle, largest first

    def to_json(self) -> dict:
        return {"id": self.id, "title": self.title, "evidence": self.evidence, "fix": self.fix,
                "saving_us": self.saving_us, "minor": self.minor,
                "culprits": [c.to_json() for c in self.culprits]}


@dataclass
class Headline:
    """A finding shown above the cards (e.g. low_utilization)."""

    id: str
    title: str
    evidence: str
    fix: str = ""
    device: int | None = None

    def to_json(self) -> dict:
        return {"id": self.id, "title": self.title, "evidence": self.evidence, "fix": self.fix}


@dataclass
class Ceiling:
    """How much faster steps could be if one cause vanished: base / (base - cause)."""

    device: int | None  # None: a trace without a GPU (the main thread's step time)
    cause: str
    cause_us: float
    base_us: float      # the step time (or the window, without steps) it is taken from
    speedup: float      # inf when the cause is all of it
    device_kind: str = "GPU"  # the trace's word for its accelerator ("MTIA")

    @property
    def text(self) -> str:
        """"up to 1.34x faster if the GPU never waited for data" (the trace's accelerator)."""
        cause = BY_CODE[self.cause]
        phrase = cause.if_gone.replace("GPU", self.device_kind) if self.device is not None \
            else cause.if_gone_cpu
        if not math.isfinite(self.speedup):
            return f"the whole step time is {cause.phrase}"
        return f"up to {self.speedup:.2f}x faster {phrase}"

    def to_json(self) -> dict:
        return {"device": device_json(self.device), "cause": self.cause, "cause_us": self.cause_us,
                "base_us": self.base_us,
                "speedup": self.speedup if math.isfinite(self.speedup) else None,
                "text": self.text}


@dataclass
class Report:
    trace: Trace
    window: tuple[float, float]
    main_track: int | None
    steps: list[Step]
    devices: dict[int, DeviceStats]    # by device id, in id order (as are all device dicts)
    phases: dict[str, np.ndarray]      # the main thread's unions per host cause, in the window
    memory: dict[int, MemoryStats]
    host_by_cause: dict[str, float] = field(default_factory=dict)
    host_base_us: float = 0.0          # what host_by_cause splits: step time, else the window
    host_python_by_annotation: dict[str, float] = field(default_factory=dict)
    host_spans: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))  # host_by_cause's
    host_codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))  # pieces
    ceilings: list[Ceiling] = field(default_factory=list)
    # What kind of window this is (WINDOW_KINDS) and, when not steady, why; ceilings of a
    # window that is not steady training are not quoted.
    window_kind: str = "steady"
    window_finding: WindowFinding | None = None
    lacks: list[Lack] = field(default_factory=list)  # said before any card
    unknown_causes: list[str] = field(default_factory=list)  # the trace cannot tell (python)
    script: str = ""                   # the entry script the trace's frames name, "" unknown
    # cause -> the events covering its idle on the device that idles most on it (card_device)
    culprits: dict[str, list[Culprit]] = field(default_factory=dict)
    collective_wait: CollectiveWait | None = None
    runtime: str = ""                  # "cuda", "hip" (ROCm) or "" (no runtime calls)
    loader_batches: int = 0            # DataLoader batches the main thread fetched in the window
    headlines: list[Headline] = field(default_factory=list)
    advice: list[Advice] = field(default_factory=list)
    # steady-state cards of a window that is not steady, or of a cause the trace cannot know:
    # shown folded, "if this were steady"
    withheld: list[Advice] = field(default_factory=list)

    @property
    def window_us(self) -> float:
        return self.window[1] - self.window[0]

    @property
    def main_thread(self) -> tuple[str, str] | None:
        return None if self.main_track is None else self.trace.tracks[self.main_track]

    def card_device(self, cause: str) -> int | None:
        """The device whose card speaks of `cause`: the one idling most on it (None: no GPU)."""
        if not self.devices:
            return None
        return max(self.devices.items(),
                   key=lambda kv: (kv[1].idle_by_cause.get(cause, 0.0), kv[0]))[0]

    @property
    def steady(self) -> bool:
        return self.window_kind == "steady"

    @property
    def advisable(self) -> bool:
        """Steady, and recorded well enough that cause cards and ceilings stand."""
        return self.steady and not any(lack.withholds for lack in self.lacks)

    @property
    def quoted_ceilings(self) -> list[Ceiling]:
        """The ceilings a renderer may quote: none for a window that is not advisable, none
        for a cause the trace cannot know."""
        if not self.advisable:
            return []
        return [c for c in self.ceilings if c.cause not in self.unknown_causes]

    @property
    def top_advice(self) -> Advice | None:
        return self.advice[0] if self.advice and not self.advice[0].minor else None

    def worst_gap(self, cause: str, device: int | None = None) -> tuple[float, float] | None:
        """The longest idle piece charged to `cause` (on `device`, else on any device)."""
        picks = [iv.longest(stats.spans_of(cause)) for dev, stats in self.devices.items()
                 if device is None or dev == device]
        return max((p for p in picks if p is not None), key=lambda p: p[1] - p[0], default=None)

    def to_json(self) -> dict:
        main = self.main_thread
        return {
            "trace": str(self.trace.path),
            "rank": self.trace.rank,
            "window_us": [self.window[0], self.window[1]],
            "main_thread": None if main is None else {"pid": main[0], "tid": main[1]},
            "steps": [s.to_json() for s in self.steps],
            "devices": {str(d): s.to_json(self.trace) for d, s in self.devices.items()},
            "host_by_cause": self.host_by_cause,
            "host_python_by_annotation": self.host_python_by_annotation,
            "ceilings": [c.to_json() for c in self.quoted_ceilings],
            "withheld_ceilings": [c.to_json() for c in self.ceilings
                                  if c not in self.quoted_ceilings],
            "window_kind": self.window_kind,
            "lacks": [lack.to_json() for lack in self.lacks],
            "unknown_causes": list(self.unknown_causes),
            "memory": {str(d): m.to_json() for d, m in self.memory.items()},
            "headlines": [h.to_json() for h in self.headlines],
            "advice": [a.to_json() for a in self.advice],
            "withheld_advice": [a.to_json() for a in self.withheld],
            "dropped_events": dict(self.trace.dropped),
        }


def device_json(dev: int | None) -> str | None:
    """A device id as JSON writes it: a string ("0"), the key of every per-device object."""
    return None if dev is None else str(dev)


def by_device_json(values: dict[int, V]) -> dict[str, V]:
    """A per-device dict with JSON's string keys, in the same (id) order."""
    return {str(d): v for d, v in values.items()}


def _overlap(comm_us: float, exposed_us: float) -> float:
    return 1.0 - exposed_us / comm_us if comm_us > 0 else 0.0
