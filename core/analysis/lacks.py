"""What a trace did not record enough of to judge (docs/definitions.md "Lacks"), said before any
card: a window too short, no CPU operators (Python time unknown), range-profiler spans instead
of kernels (timing distorted by replay), kernels filtered out, a large uncovered share."""

from __future__ import annotations

import numpy as np

from stallscope.core import intervals as iv
from stallscope.core.analysis.threads import Roles
from stallscope.core.kineto import GPU_CATS, LAUNCH_RE, RUNTIME_CATS, Cat
from stallscope.core.report import Lack, Report
from stallscope.core.trace import Trace, in_codes, unique
from stallscope.core.units import duration, pct, plural

MIN_WINDOW_US = 1000.0   # a window shorter than 1 ms ...
MIN_EVENTS = 8           # ... or holding fewer complete events is too short to judge
MIN_LAUNCHES = 10        # kernels filtered out: this many kernel launches ...
MATCHED_SHARE = 0.5      # ... of which fewer than half have their kernel in the trace
UNCOVERED_SHARE = 0.20   # an uncovered share this large of the window is said

RECORD_MORE = ("Record a longer window of steady steps: `stallscope-cli run --wait 3 --active 4 "
               "-- {script}` (torch.profiler.schedule(wait=3, warmup=1, active=4)).")
RECORD_KERNELS = ("Record the device's work: torch.profiler's activities must include "
                  "ProfilerActivity.CUDA (or the accelerator's), with no kernel filter.")
RECORD_PLAIN = ("Record without the range profiler (no CUPTI metrics / kernel replay): plain "
                "torch.profiler activities give kernel timing as it runs.")


def lacks(trace: Trace, r: Roles, report: Report) -> tuple[list[Lack], list[str]]:
    """The lacks, in the order they are said, and the causes the trace cannot know."""
    found = [lack for lack in (_too_short(trace, r, report), _kernels_filtered(trace, r),
                               _range_profiler(trace), _no_cpu_ops(trace, report),
                               _uncovered(trace, r, report)) if lack is not None]
    unknown = ["python"] if any(lack.id == "no_cpu_ops" for lack in found) else []
    return found, unknown


def _too_short(trace: Trace, r: Roles, report: Report) -> Lack | None:
    width = r.hi - r.lo
    # events stallscope reads (not the profiler's span, not other categories: a Perfetto
    # export's own tracks)
    read = ~in_codes(trace.cat, (Cat.PROFILER, Cat.OTHER))
    inside = read & (trace.end > r.lo) & (trace.start < r.hi)
    n = int(inside.sum()) if width > 0 else 0
    if width >= MIN_WINDOW_US and n >= MIN_EVENTS:
        return None
    return Lack("too_short",
                f"The window is too short to judge: {duration(max(width, 0.0))} holding "
                f"{plural(n, 'event')} (stallscope needs at least {duration(MIN_WINDOW_US)} and "
                f"{MIN_EVENTS} events); no cause card or ceiling is given.",
                RECORD_MORE.format(script=report.script or "your_script.py"), withholds=True)


def _kernels_filtered(trace: Trace, r: Roles) -> Lack | None:
    """Kernel launches whose kernels are not in the trace: the device's work was filtered out
    (or its activity not recorded)."""
    runtime = in_codes(trace.cat, RUNTIME_CATS) & (trace.corr >= 0)
    launches = runtime & trace.mask_names(lambda n: LAUNCH_RE.search(n) is not None) \
        & (trace.start >= r.lo) & (trace.start < r.hi)
    n = int(launches.sum())
    if n < MIN_LAUNCHES:
        return None
    matched = np.zeros(trace.n_events, dtype=bool)
    matched[r.launch[r.launch >= 0]] = True
    hit = int((launches & matched).sum())
    if hit >= MATCHED_SHARE * n:
        return None
    return Lack("kernels_filtered",
                f"{plural(n, 'kernel launch', 'kernel launches')} in the window, and only "
                f"{plural(hit, 'one', 'ones')} with its kernel in the trace: the device's work "
                "was filtered out or not recorded, so its busy and idle time cannot be judged; "
                "no cause card or ceiling is given.", RECORD_KERNELS, withholds=True)


def _range_profiler(trace: Trace) -> Lack | None:
    ranges = int((trace.cat == Cat.RANGE).sum())
    if ranges == 0 or (trace.cat == Cat.KERNEL).any():
        return None
    return Lack("range_profiler",
                f"The device's work is {plural(ranges, 'range-profiler span')} "
                "(cuda_profiler_range), not kernels: the range profiler replays each kernel to "
                "count its metrics, so durations and gaps are distorted; no cause card or "
                "ceiling is given.", RECORD_PLAIN, withholds=True)


def _no_cpu_ops(trace: Trace, report: Report) -> Lack | None:
    if (trace.cat == Cat.CPU_OP).any() or report.main_track is None:
        return None
    return Lack("no_cpu_ops",
                "The trace has no CPU operators (only runtime calls and device work): time "
                "between ops cannot be told from the operators themselves, so Python time is "
                "unknown.", "Record CPU activity too (ProfilerActivity.CPU).")


def _uncovered(trace: Trace, r: Roles, report: Report) -> Lack | None:
    """A large uncovered share, and the thread whose recorded events cover most of it."""
    width = r.hi - r.lo
    if width <= 0 or not report.devices:
        return None
    dev, stats = max(report.devices.items(), key=lambda kv: kv[1].idle_by_cause["uncovered"])
    us = stats.idle_by_cause["uncovered"]
    if us < UNCOVERED_SHARE * width:
        return None
    spans = stats.spans_of("uncovered")
    host = (trace.device < 0) & ~in_codes(trace.cat, (*GPU_CATS, Cat.PROFILER))
    best, best_us = None, 0.0
    for k in unique(trace.track[host]):
        mine = host & (trace.track == k)
        busy = iv.union(iv.as_intervals(trace.start[mine], trace.end[mine]))
        cover = us - iv.length(iv.subtract(spans, busy))
        if cover > best_us:
            best, best_us = int(k), cover
    what = (f"{pct(us / width)} of the {duration(width)} window on {trace.device_label(dev)} "
            f"is idle with no recorded cause ({duration(us)})")
    if best is not None and best_us >= 0.5 * us:
        pid, tid = trace.tracks[best]
        top = _top_names(trace, spans, best)
        return Lack("uncovered", f"{what}: thread pid {pid} tid {tid}, not the main thread, "
                    f"runs then ({pct(best_us / us)} of it; {top}).")
    return Lack("uncovered", f"{what}: nothing the trace recorded covers it (host code outside "
                "the profiler's view, or another process).")


def _top_names(trace: Trace, spans: np.ndarray, k: int) -> str:
    """The names of the thread's outermost events overlapping `spans`, most time first."""
    mine = np.flatnonzero((trace.track == k) & (trace.device < 0))
    ends = np.maximum.accumulate(trace.end[mine])
    outer = mine[np.concatenate([[True], trace.start[mine][1:] >= ends[:-1]])]
    covered = iv.measure_in(spans, trace.start[outer], trace.end[outer])
    cover: dict[str, float] = {}
    for i, us in zip(outer[covered > 0], covered[covered > 0], strict=True):
        name = trace.names[trace.name[i]]
        cover[name] = cover.get(name, 0.0) + float(us)
    names = sorted(cover, key=lambda n: -cover[n])[:3]
    return ", ".join(names) if names else "no named event"
