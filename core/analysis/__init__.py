"""Why the GPU waits: busy/idle per device, every idle microsecond charged to one of the eight
causes (DESIGN.md "Analysis definitions" v2), per-step figures, communication, ceilings; then
the advice and headlines read the finished Report.

    report = analyze(trace)                        # pure: reads only the Trace
    report = analyze(trace, line_stats=profiles)   # + the line heatmap's numbers for the advice

Modules: threads (steps, main thread, window, the launch join), idle (one device's causes,
python by annotation, communication), steps (per-step figures, ceilings).
"""

from __future__ import annotations

from stallscope.core import causes
from stallscope.core import intervals as iv
from stallscope.core.advice import Profile, advise, headlines
from stallscope.core.analysis import idle
from stallscope.core.analysis import steps as step_figures
from stallscope.core.analysis.threads import main_phases, roles
from stallscope.core.causes import CAUSE_LABELS, CAUSES
from stallscope.core.errors import StallscopeError
from stallscope.core.memory import memory_by_device
from stallscope.core.report import Advice, Ceiling, DeviceStats, Headline, Report, Step
from stallscope.core.trace import Trace

__all__ = ["CAUSES", "CAUSE_LABELS", "Advice", "Ceiling", "DeviceStats", "Headline", "Report",
           "Step", "analyze"]


def analyze(trace: Trace, device: int | str | None = None,
            line_stats: list[Profile] | None = None) -> Report:
    devices = trace.gpu_devices()
    if device is not None:
        if int(device) not in devices:
            have = ", ".join(map(str, devices)) or "none"
            raise StallscopeError(f"{trace.path}: no GPU activity on device {device} "
                                  f"(devices with activity: {have})")
        devices = [int(device)]
    r = roles(trace)
    phases = main_phases(trace, r)
    comm = idle.comm_mask(trace, r)
    dev_stats = {str(d): idle.device_stats(trace, r, d, phases, comm) for d in devices}
    base = step_figures.host_base(trace, r)
    host = step_figures.host_split(base, phases)
    host_by_cause = step_figures.totals(*host)
    steps = step_figures.steps(trace, r, phases, dev_stats, host)
    window_us = r.hi - r.lo
    step_windows = iv.as_intervals(trace.start[r.steps], trace.end[r.steps])
    report = Report(
        trace=trace, window=(r.lo, r.hi), main_track=r.main, steps=steps,
        devices=dev_stats, phases=phases,
        memory={d: m for d, m in memory_by_device(trace, devices, step_windows).items()
                if device is None or d == str(device)},
        host_python_by_annotation=idle.python_by_annotation(
            trace, r, host[0][host[1] == causes.index("python")]),
        host_by_cause=host_by_cause, host_base_us=iv.length(base),
        host_spans=host[0], host_codes=host[1],
        ceilings=step_figures.ceilings(steps, dev_stats, window_us, host_by_cause,
                                       iv.length(base)),
    )
    report.headlines = headlines(report)
    report.advice = advise(report, line_stats)
    return report
