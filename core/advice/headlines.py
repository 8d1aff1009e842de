"""Findings shown above the cards: `low_utilization` whenever a GPU is busy < 50%, its fix
following the largest cause. A window that is not steady (or a trace that recorded too little)
has none: its one card (window_card.py) comes first."""

from __future__ import annotations

from stallscope.core.advice.registry import compiled_counts, graph_words
from stallscope.core.causes import BY_CODE, CAUSES
from stallscope.core.report import Headline, Report
from stallscope.core.units import duration, pct, plural

LOW_UTILIZATION = 0.50
SMALL_GAP_SHARE = 0.5  # gpu_wait mostly in small gaps: tiny kernels (as the small_kernels card)

MORE_WORK = "give the GPU more work per step: raise the batch size, use mixed precision " \
            "(torch.autocast)"
LOW_UTILIZATION_FIX = MORE_WORK[0].upper() + MORE_WORK[1:] + ", and follow the cards below."
# the largest cause -> what to do first (the card that says how)
FIRST_FIX = {
    "data_loading": "Load data ahead of the step first (the DataLoader card: worker processes, "
                    "the hottest line of __getitem__); a bigger batch only waits longer.",
    "sync": "Stop blocking on the GPU inside the loop first (the sync card names the call); a "
            "bigger batch does not remove a sync.",
    "optimizer": "Make the optimizer step cheaper first (the optimizer card: foreach / fused).",
    "cpu_ops": "Launch fewer, larger kernels: torch.compile or {graphs}, and " + MORE_WORK + ".",
    "backward": "Launch backward in fewer, larger kernels: torch.compile or {graphs}, and "
                + MORE_WORK + ".",
    "python": "Take Python off the step's path first (the Python card names where it runs).",
    "gpu_wait": "Queued work waits on other streams, events or collectives: overlap "
                "communication with compute (the stream card).",
    "gpu_wait_small": "Fuse the tiny kernels (torch.compile) or replay the step as one "
                      "{graph}, and " + MORE_WORK + ".",
    "collectives": "Communication takes the step (the collectives card): overlap it, issue "
                   "fewer, larger collectives.",
}
COMPILED_FIRST = ("The step already runs compiled code: make its launches cheaper (mode="
                  "\"reduce-overhead\", {graphs} for the compiled regions, fewer graph breaks; "
                  "the cards below say how), and " + MORE_WORK + ".")


def headlines(report: Report) -> list[Headline]:
    """None for a window that is not advisable: its one card says what it is."""
    out: list[Headline] = []
    if not report.advisable:
        return out
    low = {d: s for d, s in report.devices.items() if s.utilization < LOW_UTILIZATION}
    if low:
        dev, stats = min(low.items(), key=lambda kv: (kv[1].utilization, kv[0]))
        label, kind = report.trace.device_label(dev), report.trace.device_kind
        others = (f" ({len(low)} of {len(report.devices)} {kind}s are under "
                  f"{pct(LOW_UTILIZATION, 0)})") if len(report.devices) > 1 else ""
        causes = [c for c in CAUSES if stats.idle_by_cause.get(c, 0.0) > 0]
        detail = ""
        fix = LOW_UTILIZATION_FIX
        if causes and stats.idle_us > 0:
            top = max(causes, key=lambda c: stats.idle_by_cause[c])
            detail = (f"; the largest idle cause is {BY_CODE[top].phrase} "
                      f"({duration(stats.idle_by_cause[top])}, "
                      f"{pct(stats.idle_by_cause[top] / stats.idle_us)} of idle)")
            fix = first_fix(report, dev, top)
        out.append(Headline(
            "low_utilization", f"{label} is busy only {pct(stats.utilization)} of the time",
            f"{label} is busy {duration(stats.busy_us)} of the {duration(report.window_us)} "
            f"window and idle {duration(stats.idle_us)} in {plural(stats.idle_gaps, 'gap')}"
            f"{detail}{others}.",
            fix, device=dev))
    return out


def first_fix(report: Report, dev: int, cause: str) -> str:
    """The headline's fix for the device's largest idle cause; launch causes of a step that
    already runs compiled code say so instead of "torch.compile"."""
    graph, graphs = graph_words(report)
    names = {"graphs": graphs, "graph": graph}
    key = cause
    if cause == "gpu_wait":
        spans = report.devices[dev].spans_of("gpu_wait")
        lengths = spans[:, 1] - spans[:, 0]
        total = float(lengths.sum())
        if total > 0 and float(lengths[lengths < 20.0].sum()) / total > SMALL_GAP_SHARE:
            key = "gpu_wait_small"
    wait = report.collective_wait
    if cause == "python" and wait is not None and wait.device == dev \
            and wait.us >= 0.5 * wait.python_us:
        key = "collectives"
    if key in ("cpu_ops", "backward", "gpu_wait_small") and any(compiled_counts(report)):
        return COMPILED_FIRST.format(**names)  # launch-bound, and already compiled
    text = FIRST_FIX.get(key)
    return text.format(**names) if text else LOW_UTILIZATION_FIX
