"""Numbers the viewer puts side by side: before/after deltas, per-rank rows, per-step breakdown.

Pure functions over analysis Reports. Runs of different length compare fairly because
times are per step (or per window when a trace has no steps) and utilization is a fraction.
A trace inside a session folder (as every run and every tune trial is) takes its step time and
data wait from the session's recorded steps instead (record.bin, else its step events): the
steady statistic of core/session/steady.py, the very figure tune claims (the slowest rank's
under torchrun), so tune, `compare` and the compare view state one speed-up for the same two
sessions. The profiled window's own mean stays beside it, for information.
`mismatch_warnings` says when two reports should not be compared blindly (other GPU, other rank,
GPU vs CPU-only, other step count); `Metric.change_text` hides deltas that are only noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stallscope.core import causes, units
from stallscope.core import intervals as iv
from stallscope.core.causes import CAUSES
from stallscope.core.report import Report
from stallscope.core.session.reader import open_session, session_of_trace
from stallscope.core.session.steady import Steady

STEADY_LABEL = "step time (steady mean)"
SAME_WITHIN = 0.02  # relative change below which a metric counts as unchanged
SAME_ABS = {"ms": 0.1, "%": 0.5, "MiB": 1.0, "": 0.5}  # absolute change below which it is noise
IDLE_GROUP = "idle_ms"  # the parent row of the per-cause idle rows


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    before: float | None
    after: float | None
    lower_is_better: bool | None  # None: informational, no verdict
    cause: str | None = None      # set on the per-cause idle rows (children of IDLE_GROUP)

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before

    @property
    def rel(self) -> float | None:
        if self.delta is None or not self.before:
            return None
        return self.delta / abs(self.before)

    @property
    def noise(self) -> bool:
        """The change is below the noise: too small in absolute or in relative terms."""
        if self.delta is None:
            return False
        scale = max(abs(self.before or 0.0), abs(self.after or 0.0))
        return (scale == 0 or abs(self.delta) < SAME_ABS.get(self.unit, 0.0)
                or abs(self.delta) <= SAME_WITHIN * scale)

    @property
    def verdict(self) -> str:
        """'better', 'worse', 'same' or 'n/a'."""
        if self.delta is None or self.lower_is_better is None:
            return "n/a"
        if self.noise:
            return "same"
        improved = (self.delta < 0) == self.lower_is_better
        return "better" if improved else "worse"

    def value_text(self, value: float | None) -> str:
        return format_value(value, self.unit)

    def change_text(self) -> str:
        """'+12.30 ms (-15%)', '+4.1 pts', '-' when a side is missing, '≈' when only noise."""
        if self.delta is None:
            return "-"
        if self.noise:
            return "≈"
        if self.unit == "%":
            return f"{self.delta:+.1f} pts"  # percentage points, not percent of percent
        sign = "+" if self.delta > 0 else "-"
        text = sign + format_value(abs(self.delta), self.unit)
        if self.rel is not None:
            text += f" ({100 * self.rel:+.0f}%)"
        return text


def format_value(value: float | None, unit: str) -> str:
    """A metric's value with core.units' formatters (values are in ms, %, MiB or counts)."""
    if value is None:
        return "-"
    if unit == "ms":
        return units.ms(value * 1000.0)
    if unit == "%":
        return units.pct(value / 100.0)
    if unit == "MiB":
        return units.mib(value * 2**20)
    return f"{value:,.0f}"


def primary_device(report: Report) -> int | None:
    """The device with the most busy time (the one a single-GPU user cares about); on a tie
    the lowest id."""
    if not report.devices:
        return None
    return max(report.devices, key=lambda d: (report.devices[d].busy_us, -d))


def n_steps(report: Report) -> int:
    return max(len(report.steps), 1)


def step_ms(report: Report) -> float:
    """Mean step time, or the window when the trace has no steps."""
    if report.steps:
        return float(np.mean([s.dur_us for s in report.steps])) / 1000.0
    return (report.window[1] - report.window[0]) / 1000.0


def steady_of(report: Report) -> Steady | None:
    """The steady window of the session the report's trace belongs to (the slowest rank's);
    None for a bare trace or a session without steps."""
    session = session_of_trace(report.trace.path)
    if session is None:
        return None
    try:
        found = open_session(session).steady()
    except Exception:  # noqa: BLE001 - an unreadable session: the trace's own figures stand
        return None
    return found[1] if found is not None else None


def summary_values(report: Report, device: int | None = None,
                   steady: Steady | None = None) -> dict[str, tuple]:
    """key -> (label, unit, value, lower_is_better, cause) for one report; cause is set on the
    per-cause idle rows only. With the session's `steady` window, `step_ms` is its steady
    step time and the profiled window's mean is informational."""
    dev = device if device is not None else primary_device(report)
    per = 1000.0 * n_steps(report)
    out: dict[str, tuple] = {"steps": ("steps" if steady is None else "steps (profiled window)",
                                       "", float(len(report.steps)), None, None)}
    if steady is not None:
        out["step_ms"] = (STEADY_LABEL, "ms", steady.step_ms, True, None)
        # epoch starts included, as the run summary, its header and check state it
        out["data_wait_ms"] = ("data wait/step (steady, incl. epoch starts)", "ms",
                               steady.data_wait_ms, True, None)
        out["data_wait_pct"] = ("data wait share (steady, incl. epoch starts)", "%",
                                100 * steady.data_wait_share, True, None)
        out["steady_steps"] = ("steady steps", "", float(steady.steps), None, None)
        out["window_step_ms"] = ("step time (profiled window mean)", "ms", step_ms(report),
                                 None, None)
    else:
        out["step_ms"] = ("step time (mean)", "ms", step_ms(report), True, None)
    stats = report.devices.get(dev) if dev is not None else None
    if stats is not None:
        out["utilization"] = ("GPU utilization", "%", 100.0 * stats.utilization, False, None)
        out[IDLE_GROUP] = ("GPU idle/step", "ms", stats.idle_us / per, True, None)
        for cause in CAUSES:
            out[f"idle_{cause}_ms"] = (f"GPU idle/step: {causes.label(cause)}", "ms",
                                       stats.idle_by_cause.get(cause, 0.0) / per, True, cause)
    if report.steps:
        dl = float(np.mean([s.data_loading_us for s in report.steps])) / 1000.0
        out["data_loading_ms"] = ("CPU data loading/step", "ms", dl, True, None)
    mem = report.memory.get(dev) if dev is not None else None
    if mem is not None and mem.peak_reserved is not None:
        out["peak_reserved_mib"] = ("peak reserved", "MiB", mem.peak_reserved / 2**20, None,
                                    None)
    if mem is not None and mem.peak_allocated is not None:
        out["peak_allocated_mib"] = ("peak allocated", "MiB",
                                     mem.peak_allocated / 2**20, None, None)
    if mem is not None:
        out["reserved_drops"] = ("reserved drops", "", float(mem.reserved_drops), True, None)
    return out


def compare_reports(before: Report, after: Report, device_before: int | None = None,
                    device_after: int | None = None) -> list[Metric]:
    """Metrics of both runs with deltas, in a stable order (before's keys first). Step time is
    the steady statistic when both traces belong to sessions, else the traces' own mean."""
    sb, sa = steady_of(before), steady_of(after)
    if sb is None or sa is None:
        sb = sa = None  # one statistic on both sides or none
    a = summary_values(before, device_before, sb)
    b = summary_values(after, device_after, sa)
    keys = list(a) + [k for k in b if k not in a]
    metrics = []
    for key in keys:
        label, unit, _, lower, cause = a.get(key) or b[key]
        metrics.append(Metric(key, label, unit, a[key][2] if key in a else None,
                              b[key][2] if key in b else None, lower, cause))
    return metrics


def speedup(metrics: list[Metric]) -> float | None:
    """Before's step time over after's (> 1: after is faster)."""
    step = next((m for m in metrics if m.key == "step_ms"), None)
    if step is None or not step.before or not step.after:
        return None
    return step.before / step.after


VERDICT_WORDS = {"better": "faster", "worse": "slower", "same": "about as fast"}


@dataclass(frozen=True)
class Verdict:
    """The comparison in one line, for the CLI and the compare view alike."""

    word: str               # "faster" | "slower" | "about as fast" | "n/a"
    text: str               # leads with "not like for like" when machines or ranks differ
    step: Metric | None     # the step time's metric
    cause: Metric | None    # the idle cause that moved most in the verdict's direction
    unlike: tuple[str, ...] = ()


def verdict(metrics: list[Metric], unlike_lines: list[str] | tuple[str, ...] = ()) -> Verdict:
    """The step time's verdict, and as its reason only an idle cause that moved the same way
    (more idle when slower, less when faster; the largest mover when about as fast)."""
    lead = ("not like for like (" + "; ".join(unlike_lines) + "): "
            if unlike_lines else "")
    by_key = {m.key: m for m in metrics}
    step = by_key.get("step_ms")
    if step is None or step.delta is None:
        return Verdict("n/a", lead + "no verdict: one side has no step time", step, None,
                       tuple(unlike_lines))
    word = VERDICT_WORDS.get(step.verdict, "n/a")
    gain = speedup(metrics)
    times = f"{gain:.2f}x, " if gain is not None and not step.noise else ""
    change = "within noise" if step.noise else step.change_text()
    text = (f"{lead}after is {word}: {times}{step.value_text(step.before)} → "
            f"{step.value_text(step.after)} per step, {change}")
    same_way = [m for m in metrics if m.cause is not None and m.delta is not None
                and not m.noise and (step.verdict == "same" or m.verdict == step.verdict)]
    top = max(same_way, key=lambda m: abs(m.delta or 0.0), default=None)
    if top is not None and top.cause is not None:
        text += (f"; idle on {causes.label(top.cause)} {top.value_text(top.before)} → "
                 f"{top.value_text(top.after)} per step")
    return Verdict(word, text, step, top, tuple(unlike_lines))


def statistic(metrics: list[Metric]) -> str:
    """Which statistic the step time is, in words."""
    step = next((m for m in metrics if m.key == "step_ms"), None)
    if step is not None and step.label == STEADY_LABEL:
        return ("steady mean of the sessions' recorded steps (elapsed over the steady steps / "
                "their count; the slowest rank's under torchrun)")
    return "mean ProfilerStep duration in the traces' profiled windows"


def device_name(report: Report, device: int | None) -> str | None:
    """The GPU's name from the trace's deviceProperties, when the trace has one for `device`."""
    if device is None:
        return None
    for props in report.trace.device_properties:
        if str(props.get("id")) == str(device) and props.get("name"):  # "id": 0 or "0"
            return str(props["name"])
    return None


def unlike(before: Report, after: Report, device_before: int | None = None,
           device_after: int | None = None) -> list[str]:
    """Why the two sides ran on different machines or ranks (empty when they did not): such a
    comparison says nothing about a change to the code, whatever its step times."""
    dev_b = device_before if device_before is not None else primary_device(before)
    dev_a = device_after if device_after is not None else primary_device(after)
    out = []
    if (dev_b is None) != (dev_a is None):
        gpu, cpu = ("before", "after") if dev_a is None else ("after", "before")
        out.append(f"{gpu} ran on a GPU, {cpu} is CPU-only: GPU figures have nothing to "
                   "compare with, step times compare different machines")
    name_b, name_a = device_name(before, dev_b), device_name(after, dev_a)
    if name_b and name_a and name_b != name_a:
        out.append(f"different GPUs: {name_b} (device {dev_b}) vs {name_a} (device {dev_a})")
    rank_b, rank_a = before.trace.rank, after.trace.rank
    if rank_b is not None and rank_a is not None and rank_b != rank_a:
        out.append(f"different ranks: rank {rank_b} vs rank {rank_a}")
    return out


def mismatch_warnings(before: Report, after: Report, device_before: int | None = None,
                      device_after: int | None = None) -> list[str]:
    """One line per reason why before and after are not like for like (empty when they are):
    different machines or ranks (unlike), then different windows."""
    out = unlike(before, after, device_before, device_after)
    if len(before.steps) != len(after.steps):
        out.append(f"different step counts: {units.plural(len(before.steps), 'step')} vs "
                   f"{units.plural(len(after.steps), 'step')} (per-step figures are means)")
    sb, sa = steady_of(before), steady_of(after)
    if (sb is None) != (sa is None):
        which = "before" if sa is None else "after"
        out.append(f"only {which} belongs to a session: step times are the traces' profiled "
                   "windows, not the steady statistic")
    for name, w in (("before", sb), ("after", sa)):
        if sb is not None and sa is not None and w is not None and not w.reached:
            out.append(f"{name}: {w.note}")
    return out


# ----------------------------------------------------------------------------- ranks


@dataclass(frozen=True)
class RankRow:
    label: str
    step_ms: float
    utilization: float | None         # 0..1 on the rank's busiest device
    idle_ms_by_cause: dict[str, float]  # per step
    slowest: bool = False


def rank_rows(reports: list[Report], labels: list[str],
              slowest: str | None = None) -> list[RankRow]:
    """One row per rank; marked slowest: the rank labelled `slowest` (the straggler the others
    waited for), else the one with the longest mean step."""
    rows = []
    for report, label in zip(reports, labels, strict=True):
        dev = primary_device(report)
        stats = report.devices.get(dev) if dev is not None else None
        per = 1000.0 * n_steps(report)
        idle = {c: (stats.idle_by_cause.get(c, 0.0) / per if stats else 0.0) for c in CAUSES}
        rows.append(RankRow(label, step_ms(report), stats.utilization if stats else None, idle))
    if len(rows) > 1:
        worst = (labels.index(slowest) if slowest in labels
                 else int(np.argmax([r.step_ms for r in rows])))
        r = rows[worst]
        rows[worst] = RankRow(r.label, r.step_ms, r.utilization, r.idle_ms_by_cause, True)
    return rows


# ----------------------------------------------------------------------------- steps

STEP_PARTS = ("compute", *CAUSES)


def step_breakdown(report: Report, device: int | None = None) -> dict[str, np.ndarray]:
    """Per step, µs of the step split into parts that stack into one bar: with a GPU, its busy
    time ("compute") and its idle time by cause; without one, the main thread's step time by
    cause. The parts add up to each step's duration; every cause has its own part.
    """
    n = len(report.steps)
    out = {part: np.zeros(n) for part in STEP_PARTS}
    if n == 0:
        return out
    dur = np.array([s.dur_us for s in report.steps])
    dev = device if device is not None else primary_device(report)
    stats = report.devices.get(dev) if dev is not None else None
    if dev is None or stats is None:  # no GPU: the main thread's step time, by what it was in
        host = [getattr(s, "host_by_cause", None) or {} for s in report.steps]
        if any(host):
            for cause in CAUSES:
                out[cause] = np.array([h.get(cause, 0.0) for h in host])
        else:
            out["data_loading"] = np.array([s.data_loading_us for s in report.steps])
            out["optimizer"] = np.array([s.optimizer_us for s in report.steps])
        return _rest_uncovered(out, dur)
    out["compute"] = np.array([s.gpu_busy_us.get(dev, 0.0) for s in report.steps])
    per_step = [(getattr(s, "idle_by_cause", None) or {}).get(dev) for s in report.steps]
    known = [p for p in per_step if p is not None]
    if len(known) == len(per_step):
        for cause in CAUSES:
            out[cause] = np.array([p.get(cause, 0.0) for p in known])
    else:  # the analysis gives no per-step causes: clip the device's painted spans to each step
        lo = np.array([s.start_us for s in report.steps])
        for code, cause in enumerate(CAUSES):
            if cause != "uncovered":
                spans = stats.cause_spans[stats.cause_codes == code]
                out[cause] = covered_in(spans, lo, lo + dur)
    return _rest_uncovered(out, dur)


def _rest_uncovered(parts: dict[str, np.ndarray], dur: np.ndarray) -> dict[str, np.ndarray]:
    """Whatever of the step no part explains is `uncovered`, so the parts add up to it."""
    known = sum(v for k, v in parts.items() if k != "uncovered")
    parts["uncovered"] = np.maximum(parts["uncovered"], np.maximum(dur - known, 0.0))
    return parts


def covered_in(spans: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Length of sorted disjoint `spans` inside each window [lo_k, hi_k]."""
    return iv.measure_in(spans, lo, hi)
