"""The one-line headline of a Report ("GPU idle 44%, mostly data loading")."""

from __future__ import annotations

from functools import partial
from typing import Any

from stallscope.core import units
from stallscope.core.causes import BY_CODE
from stallscope.core.units import duration, plural

pct = partial(units.pct, digits=0)


WINDOW_TAGS = {"startup": "start-up window", "graph_capture": "graph-capture window",
               "one_step": "one step"}


def headline(report: Any) -> str:
    """One line that sums up a Report, e.g. "GPU idle 44%, mostly data loading", and what kind
    of window it is when not steady training ("... (start-up window)").

    With several GPUs it speaks of the one that idles most; with none, of the CPU steps.
    """
    line = _headline(report)
    tag = WINDOW_TAGS.get(getattr(report, "window_kind", "steady"))
    return f"{line} ({tag})" if tag else line


def _headline(report: Any) -> str:
    devices = getattr(report, "devices", None) or {}
    window = _window_us(report)
    if not devices:
        return _cpu_only_headline(report, window)
    dev, stats = max(devices.items(), key=lambda kv: (kv[1].idle_us, str(kv[0])))
    who = "GPU" if len(devices) == 1 else f"GPU {dev} (worst of {len(devices)})"
    total = stats.busy_us + stats.idle_us
    idle_frac = stats.idle_us / total if total > 0 else 0.0
    if idle_frac < 0.05:
        return f"{who} busy {pct(1.0 - idle_frac)}, no idle time worth chasing"
    causes = {k: v for k, v in (stats.idle_by_cause or {}).items() if v > 0}
    if not causes:
        return f"{who} idle {pct(idle_frac)}"
    cause, cause_us = max(causes.items(), key=lambda kv: kv[1])
    share = cause_us / stats.idle_us if stats.idle_us > 0 else 0.0
    label = BY_CODE[cause].phrase if cause in BY_CODE else cause.replace("_", " ")
    if share >= 0.5:
        return f"{who} idle {pct(idle_frac)}, mostly {label}"
    return f"{who} idle {pct(idle_frac)}, largest cause {label} ({pct(share)} of it)"


def _cpu_only_headline(report: Any, window: float) -> str:
    steps = getattr(report, "steps", None) or []
    step_us = sum(float(st.dur_us) for st in steps)
    data_us = sum(float(st.data_loading_us) for st in steps)
    if step_us > 0 and data_us / step_us >= 0.05:
        return f"No GPU in trace; steps wait on data loading {pct(data_us / step_us)} of the time"
    count = plural(len(steps), "step")
    span = f" over {duration(window)}" if window > 0 else ""
    return f"No GPU in trace (CPU only), {count}{span}"


def _window_us(report: Any) -> float:
    window = getattr(report, "window", None)
    if not window:
        return 0.0
    lo, hi = window
    return max(0.0, float(hi) - float(lo))

