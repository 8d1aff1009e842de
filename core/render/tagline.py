"""A Report's tagline: the one line the start screen's recent list shows under a trace
("GPU idle 44%, mostly data loading"). Not a headline: those are advice/headlines.py's
findings shown above the cards."""

from __future__ import annotations

from functools import partial

from stallscope.core import units
from stallscope.core.causes import BY_CODE
from stallscope.core.render.facts import window_kind_text
from stallscope.core.report import Report
from stallscope.core.units import duration, plural

pct = partial(units.pct, digits=0)




def tagline(report: Report) -> str:
    """One line that sums up a Report, e.g. "GPU idle 44%, mostly data loading", and what kind
    of window it is when not steady training ("... (start-up window)").

    With several GPUs it speaks of the one that idles most; with none, of the CPU steps.
    """
    line = _device_line(report)
    return line if report.steady else f"{line} ({window_kind_text(report)})"


def _device_line(report: Report) -> str:
    devices = report.devices
    if not devices:
        return _cpu_only_line(report)
    dev, stats = max(devices.items(), key=lambda kv: (kv[1].idle_us, kv[0]))
    who = report.trace.device_kind if len(devices) == 1 else \
        f"{report.trace.device_label(dev)} (worst of {len(devices)})"
    total = stats.busy_us + stats.idle_us
    idle_frac = stats.idle_us / total if total > 0 else 0.0
    if idle_frac < 0.05:
        return f"{who} busy {pct(1.0 - idle_frac)}, no idle time worth chasing"
    causes = {k: v for k, v in stats.idle_by_cause.items() if v > 0}
    if not causes:
        return f"{who} idle {pct(idle_frac)}"
    cause, cause_us = max(causes.items(), key=lambda kv: kv[1])
    share = cause_us / stats.idle_us if stats.idle_us > 0 else 0.0
    label = BY_CODE[cause].phrase if cause in BY_CODE else cause.replace("_", " ")
    if share >= 0.5:
        return f"{who} idle {pct(idle_frac)}, mostly {label}"
    return f"{who} idle {pct(idle_frac)}, largest cause {label} ({pct(share)} of it)"


def _cpu_only_line(report: Report) -> str:
    steps = report.steps
    window = max(report.window_us, 0.0)
    step_us = sum(float(st.dur_us) for st in steps)
    data_us = sum(float(st.data_loading_us) for st in steps)
    if step_us > 0 and data_us / step_us >= 0.05:
        return f"No GPU in trace; steps wait on data loading {pct(data_us / step_us)} of the time"
    count = plural(len(steps), "step")
    span = f" over {duration(window)}" if window > 0 else ""
    return f"No GPU in trace (CPU only), {count}{span}"

