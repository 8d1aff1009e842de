"""The rule registry and what every rule reads: a Context over the finished Report.

A rule is a function `(ctx) -> Advice | None` registered with `@rule("rule_id")`; adding one is
a change to the module that holds it (and its test). Thresholds are docs/definitions.md's "Advice".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from stallscope.core import causes
from stallscope.core.causes import CAUSES
from stallscope.core.intervals import longest
from stallscope.core.kineto import COMPILED_PREFIXES, GRAPH_LAUNCH_RE, RUNTIME_CATS
from stallscope.core.lineprof import Profile
from stallscope.core.report import Advice, Culprit, DeviceStats, Report
from stallscope.core.session.steady import busiest_loader

CAUSE_SHARE = 0.05      # a cause rule fires at 5% of the window (or of step time without a GPU)
CARD_IDLE_SHARE = 0.10  # a GPU idle this much of the window always gets its largest cause carded
MINOR_SHARE = 0.01      # a card worth less than 1% of the window is minor, never the top card

Rule = Callable[["Context"], Advice | None]
RULES: dict[str, Rule] = {}


def rule(rule_id: str) -> Callable[[Rule], Rule]:
    """Register a rule under its id (the card's `id`); ids are unique."""
    def register(fn: Rule) -> Rule:
        if rule_id in RULES:
            raise ValueError(f"advice rule {rule_id!r} registered twice")
        RULES[rule_id] = fn
        return fn
    return register


@dataclass
class Context:
    """The report plus what several rules need: the base the shares are taken of (the window;
    without a GPU, step time), the causes that must be carded, the line stats."""

    report: Report
    line_stats: list[Profile] | None = None
    forced: dict[str, int] = field(default_factory=dict)  # cause -> device whose largest it is
    loaders: list[dict] = field(default_factory=list)  # run.json `dataloaders`: site, passed...
    cores: int | None = None  # the recording machine's usable CPUs (run.json `cpu_count`)
    place: str = ""  # options that run the script where it ran ("--host gpu-box ... "), or ""
    _compiled: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        width = self.report.window_us
        for dev, stats in self.report.devices.items():
            if width <= 0 or stats.idle_us < CARD_IDLE_SHARE * width:
                continue
            ranked = [c for c in CAUSES[:-1] if stats.idle_by_cause.get(c, 0.0) > 0]
            if ranked:
                top = max(ranked, key=lambda c: stats.idle_by_cause[c])
                self.forced.setdefault(top, dev)

    @property
    def gpu(self) -> bool:
        return bool(self.report.devices)

    @property
    def base_us(self) -> float:
        """What shares are taken of: the window; without a GPU, the main thread's step time."""
        return self.report.window_us if self.gpu else self.report.host_base_us

    @property
    def n_steps(self) -> int:
        return len(self.report.steps)

    def cause_on(self, cause: str) -> tuple[int | None, float]:
        """(device, idle µs) of the device that idles most on `cause`; without a GPU
        (None, the main thread's step time in it)."""
        if not self.gpu:
            dev, us = None, self.report.host_by_cause.get(cause, 0.0)
        else:
            dev = self.report.card_device(cause)
            assert dev is not None  # self.gpu: there are devices to choose from
            us = self.report.devices[dev].idle_by_cause.get(cause, 0.0)
        wait = self.report.collective_wait
        if cause == "python" and wait is not None and self.collectives_fire and wait.device == dev:
            us = max(us - wait.us, 0.0)  # communication, not Python
        return dev, us

    @property
    def collectives_fire(self) -> bool:
        """Whether collectives on other threads get their own card (then they leave the python
        card): at 5% of the base like a cause, or as most of the python time of a GPU whose
        largest idle cause python is."""
        wait = self.report.collective_wait
        if wait is None or self.base_us <= 0 or wait.us <= 0:
            return False
        carded = self.forced.get("python") == wait.device and wait.us >= 0.5 * wait.python_us
        return wait.us >= CAUSE_SHARE * self.base_us or carded

    def fires(self, cause: str) -> tuple[int | None, float] | None:
        """(device, µs) when `cause` holds >= 5% of the base or must be carded, else None."""
        dev, us = self.cause_on(cause)
        if cause in self.forced and us > 0:
            return dev, us
        if self.base_us > 0 and us >= CAUSE_SHARE * self.base_us:
            return dev, us
        return None

    def culprits(self, cause: str) -> list[Culprit]:
        return list(self.report.culprits.get(cause, []))

    @property
    def rocm(self) -> bool:
        return self.report.runtime == "hip"

    def rt(self, name: str) -> str:
        """A CUDA runtime name in the trace's own flavour: cudaMalloc -> hipMalloc on ROCm."""
        return "hip" + name.removeprefix("cuda") if self.rocm else name

    @property
    def graph(self) -> str:
        return graph_words(self.report)[0]

    @property
    def graphs(self) -> str:
        return graph_words(self.report)[1]

    @property
    def script(self) -> str:
        """The script for a command to paste: the one the trace's frames run, else the file
        of the session's busiest DataLoader line (a bare name), else a placeholder."""
        if self.report.script:
            return self.report.script
        site = str(busiest_loader(self.loaders).get("site") or "")
        name = site.rsplit(":", 1)[0] if ":" in site else ""
        return name if name.endswith(".py") and "/" not in name else "your_script.py"

    @property
    def compiled(self) -> tuple[int, int]:
        """(compiled-region events, graph replays) in the window: code torch.compile or
        CUDA/HIP graphs already run."""
        if self._compiled is None:
            self._compiled = compiled_counts(self.report)
        return self._compiled

    def label(self, dev: int) -> str:
        """The device for people: "GPU 0", "MTIA 17"."""
        return self.report.trace.device_label(dev)

    @property
    def kind(self) -> str:
        """What the trace's devices are: "GPU", "MTIA"."""
        return self.report.trace.device_kind

    def titled(self, title: str) -> str:
        """A card's title in the trace's device kind: "The MTIA waits for data"."""
        return title.replace("GPU", self.kind)

    def stats(self, dev: int | None) -> DeviceStats | None:
        return None if dev is None else self.report.devices.get(dev)

    def share(self, us: float) -> float:
        return us / self.base_us if self.base_us > 0 else 0.0

    def rank_phrase(self, dev: int | None, cause: str) -> str:
        """"the largest idle cause" / "2nd of 8 causes" for the evidence."""
        by = self.report.devices[dev].idle_by_cause if dev is not None \
            else self.report.host_by_cause
        order = sorted(by, key=lambda c: -by[c])
        k = order.index(cause) + 1
        if k == 1:
            return "the largest idle cause" if self.gpu else "the largest share of step time"
        return f"the {_ordinal(k)} largest idle cause" if self.gpu else \
            f"the {_ordinal(k)} largest share of step time"

    def focus(self, cause: str, dev: int | None) -> tuple[float, float] | None:
        if dev is not None:
            return self.report.worst_gap(cause, dev)
        r = self.report
        return longest(r.host_spans[r.host_codes == causes.index(cause)])




def graph_words(report: Report) -> tuple[str, str]:
    """(a graph, graphs) in the trace's own words: CUDA, HIP on ROCm, the accelerator's."""
    if report.trace.device_kind != "GPU":
        kind = report.trace.device_kind
        return f"{kind} graph", f"graph capture, where the {kind} runtime offers it"
    if report.runtime == "hip":
        return "HIP graph", "HIP graphs (torch.cuda.CUDAGraph on ROCm)"
    return "CUDA graph", "CUDA graphs"


def compiled_counts(report: Report) -> tuple[int, int]:
    t = report.trace
    lo, hi = report.window
    inside = (t.start < hi) & (t.end > lo)
    regions = t.mask_names(lambda n: n.startswith(COMPILED_PREFIXES)) & inside
    runtime = np.isin(t.cat, np.array(RUNTIME_CATS, dtype=np.int8))
    replays = runtime & t.mask_names(lambda n: GRAPH_LAUNCH_RE.search(n) is not None) & inside
    return int(regions.sum()), int(replays.sum())


def _ordinal(k: int) -> str:
    return {2: "2nd", 3: "3rd"}.get(k, f"{k}th")
