"""Findings shown above the cards. `low_utilization` is one whenever a GPU is busy < 50%."""

from __future__ import annotations

from stallscope.core.causes import BY_CODE, CAUSES
from stallscope.core.report import Headline, Report
from stallscope.core.units import duration, pct

LOW_UTILIZATION = 0.50

LOW_UTILIZATION_FIX = (
    "Give the GPU more work per step: raise the batch size, use mixed precision "
    "(torch.autocast), and follow the cards below.")


def headlines(report: Report) -> list[Headline]:
    out = []
    low = {d: s for d, s in report.devices.items() if s.utilization < LOW_UTILIZATION}
    if low:
        dev, stats = min(low.items(), key=lambda kv: (kv[1].utilization, kv[0]))
        others = (f" ({len(low)} of {len(report.devices)} GPUs are under "
                  f"{pct(LOW_UTILIZATION, 0)})") if len(report.devices) > 1 else ""
        causes = [c for c in CAUSES if stats.idle_by_cause.get(c, 0.0) > 0]
        detail = ""
        if causes and stats.idle_us > 0:
            top = max(causes, key=lambda c: stats.idle_by_cause[c])
            detail = (f"; the largest idle cause is {BY_CODE[top].phrase} "
                      f"({duration(stats.idle_by_cause[top])}, "
                      f"{pct(stats.idle_by_cause[top] / stats.idle_us)} of idle)")
        out.append(Headline(
            "low_utilization", f"GPU {dev} is busy only {pct(stats.utilization)} of the time",
            f"GPU {dev} is busy {duration(stats.busy_us)} of the {duration(report.window_us)} "
            f"window and idle {duration(stats.idle_us)} in {stats.idle_gaps:,} gaps"
            f"{detail}{others}.",
            LOW_UTILIZATION_FIX, device=dev))
    return out
