"""Typed events of a session (events*.jsonl, written by capture/): what the app and the CLI
read, instead of raw dicts. `typed(record)` turns one decoded line into one of these;
`StepColumns` grows per-step numpy columns as step events arrive (a live run, a replay)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stallscope.core.capture import layout
from stallscope.core.session.steady import Steady, steady

STEP_FIELDS = ("wall_ms", "data_wait_ms", "rss", "cuda_allocated", "cuda_reserved")


def _num(value) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else np.nan


def _rank(record: dict) -> int | None:
    rank = record.get("rank")
    return rank if isinstance(rank, int) else None


@dataclass(frozen=True)
class Event:
    """Any event; the specific kinds below carry their fields typed."""

    kind: str
    t: float
    rank: int | None
    raw: dict = field(default_factory=dict, compare=False, repr=False)  # the decoded line


@dataclass(frozen=True)
class Started(Event):
    script: str = ""
    args: tuple[str, ...] = ()
    python: str = ""
    torch: str = ""
    devices: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class StepEvent(Event):
    n: int = 0
    wall_ms: float = np.nan
    data_wait_ms: float = np.nan
    rss: float = np.nan
    cuda_allocated: float = np.nan
    cuda_reserved: float = np.nan
    phase: str = ""
    batches: int = 0
    span_steps: float = np.nan         # a thinned line: the steps it stands for (itself too)
    span_data_wait_ms: float = np.nan  # ... and their summed data wait


@dataclass(frozen=True)
class DataLoaderBuilt(Event):
    index: int = 0
    site: str = ""
    file: str = ""
    line: int = 0
    passed: dict = field(default_factory=dict)
    overridden: dict = field(default_factory=dict)
    effective: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TraceReady(Event):
    path: str = ""
    complete: bool = True


@dataclass(frozen=True)
class LineprofReady(Event):
    path: str = ""


@dataclass(frozen=True)
class Message(Event):
    """A warning or an error the runner (or line profiling) reported."""

    message: str = ""
    code: str = ""
    python: str = ""


@dataclass(frozen=True)
class ScriptException:
    type: str
    message: str
    traceback: str = ""
    step: int | None = None

    @property
    def text(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type


@dataclass(frozen=True)
class Finished(Event):
    rc: int | None = None
    reason: str = ""
    steps: int | None = None
    warning: str = ""
    exception: ScriptException | None = None
    traces: tuple[str, ...] = ()
    dataloaders: tuple[dict, ...] = ()


def _strs(value) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


def _opt_int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _int(value) -> int:
    number = _opt_int(value)
    return 0 if number is None else number


def _exception(value) -> ScriptException | None:
    if not isinstance(value, dict):
        return None
    return ScriptException(str(value.get("type", "Exception")), str(value.get("message", "")),
                           str(value.get("traceback", "")), _opt_int(value.get("step")))


def typed(record: dict) -> Event:
    """One decoded events line as a typed event (unknown kinds stay a plain Event)."""
    kind = str(record.get("event", ""))
    t = _num(record.get("t"))
    base = (kind, 0.0 if np.isnan(t) else t, _rank(record))
    g = record.get
    if kind == layout.STEP:
        return StepEvent(*base, raw=record, n=_int(g("n")), phase=str(g("phase", "")),
                         batches=_int(g("batches")), wall_ms=_num(g("wall_ms")),
                         data_wait_ms=_num(g("data_wait_ms")), rss=_num(g("rss")),
                         cuda_allocated=_num(g("cuda_allocated")),
                         cuda_reserved=_num(g("cuda_reserved")),
                         span_steps=_num(g("span_steps")),
                         span_data_wait_ms=_num(g("span_data_wait_ms")))
    if kind == layout.STARTED:
        return Started(*base, raw=record, script=str(g("script", "")), args=_strs(g("args")),
                       python=str(g("python", "")), torch=str(g("torch", "")),
                       devices=_strs(g("devices")), overrides=_strs(g("overrides")))
    if kind == layout.DATALOADER:
        return DataLoaderBuilt(*base, raw=record, index=_int(g("index")), site=str(g("site", "")),
                               file=str(g("file", "")), line=_int(g("line")),
                               passed=_dict(g("passed")), overridden=_dict(g("overridden")),
                               effective=_dict(g("effective")), notes=_strs(g("notes")))
    if kind == layout.TRACE_READY:
        return TraceReady(*base, raw=record, path=str(g("path") or ""),
                          complete=bool(g("complete", True)))
    if kind == layout.LINEPROF_READY:
        return LineprofReady(*base, raw=record, path=str(g("path") or ""))
    if kind in (layout.WARNING, layout.ERROR):
        return Message(*base, raw=record, message=str(g("message", "")), code=str(g("code") or ""),
                       python=str(g("python") or ""))
    if kind == layout.FINISHED:
        loaders = g("dataloaders")
        return Finished(*base, raw=record, rc=_opt_int(g("rc")), reason=str(g("reason") or ""),
                        steps=_opt_int(g("steps")), warning=str(g("warning") or ""),
                        exception=_exception(g("exception")), traces=_strs(g("traces")),
                        dataloaders=tuple(d for d in loaders if isinstance(d, dict))
                        if isinstance(loaders, list) else ())
    return Event(*base, raw=record)


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


class StepColumns:
    """Growing per-step columns of one rank (amortised appends; readers take slices), with
    the event times and batch counts the steady statistic needs (`steady`)."""

    # n: thinned events skip steps; span_*: what a thinned line stands for
    COLUMNS = (*STEP_FIELDS, "t", "batches", "n", "span_steps", "span_data_wait_ms")

    def __init__(self) -> None:
        self.n = 0
        self.cols = {k: np.full(256, np.nan) for k in self.COLUMNS}
        self.active: list[int] = []  # step indices inside the profiling window
        self.phases: list[str] = []
        self.last_phase = ""

    def add(self, step: StepEvent) -> None:
        if self.n == len(self.cols["wall_ms"]):
            for k, col in self.cols.items():
                self.cols[k] = np.concatenate([col, np.full(len(col), np.nan)])
        for k in self.COLUMNS:
            self.cols[k][self.n] = getattr(step, k)
        self.phases.append(step.phase)
        self.last_phase = step.phase
        if step.phase == "active":
            self.active.append(self.n)
        self.n += 1

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key: str) -> np.ndarray:
        return self.cols[key][: self.n]

    def steady(self, queued: int = 0) -> Steady | None:
        """The steady window of the steps so far (core/session/steady.py): the one statistic
        the run summary, compare and tune state. `queued`: workers x prefetch_factor."""
        return steady(self["t"], self["wall_ms"], self["data_wait_ms"], self["batches"],
                      self.phases, queued, n=self["n"], span_steps=self["span_steps"],
                      span_wait_ms=self["span_data_wait_ms"])
