"""Why the GPU waits: busy/idle per device, every idle microsecond charged to one of the eight
causes (docs/definitions.md "Busy, idle and the eight causes"), per-step figures,
communication, ceilings; then the advice and headlines read the finished Report.

    report = analyze(trace)                        # reads the Trace (and, for a trace in a
                                                   # session, the runner's record of its steps)
    report = analyze(trace, line_stats=profiles)   # + the line heatmap's numbers for the advice
    report = analyze(trace, loaders=entries)       # + the session's DataLoaders (run.json)

Modules: threads (steps, main thread, window, the launch join), idle (one device's causes,
python by annotation, communication), steps (per-step figures, ceilings).
"""

from __future__ import annotations

import numpy as np

from stallscope.core import causes
from stallscope.core import intervals as iv
from stallscope.core.advice import Profile, advise_report
from stallscope.core.analysis import idle
from stallscope.core.analysis import steps as step_figures
from stallscope.core.analysis.collectives import collective_wait
from stallscope.core.analysis.culprits import culprits_by_cause, loader_batches
from stallscope.core.analysis.lacks import lacks
from stallscope.core.analysis.threads import Roles, main_phases, roles
from stallscope.core.analysis.window import entry_script, window_finding
from stallscope.core.errors import StallscopeError
from stallscope.core.kineto import RUNTIME_CATS
from stallscope.core.memory import memory_by_device
from stallscope.core.report import Report
from stallscope.core.session.trace_steps import runner_window
from stallscope.core.trace import Trace, in_codes, unique

__all__ = ["analyze"]


def analyze(trace: Trace, device: int | None = None,
            line_stats: list[Profile] | None = None,
            loaders: list[dict] | None = None, cores: int | None = None,
            place: str = "") -> Report:
    devices = trace.gpu_devices()
    if device is not None:
        if device not in devices:
            have = ", ".join(map(str, devices)) or "none"
            raise StallscopeError(f"{trace.path}: no GPU activity on device {device} "
                                  f"(devices with activity: {have})")
        devices = [device]
    r = roles(trace)
    phases = main_phases(trace, r)
    comm = idle.comm_mask(trace, r)
    dev_stats = {d: idle.device_stats(trace, r, d, phases, comm) for d in devices}
    base = step_figures.host_base(trace, r)
    host = step_figures.host_split(base, phases)
    host_by_cause = step_figures.totals(*host)
    steps = step_figures.steps(trace, r, phases, dev_stats, host)
    window_us = r.hi - r.lo
    # allocator calls count inside steps; without steps, over the whole window
    step_windows = iv.as_intervals(trace.start[r.steps], trace.end[r.steps]) if len(r.steps) \
        else np.array([[r.lo, r.hi]])
    report = Report(
        trace=trace, window=(r.lo, r.hi), main_track=r.main, steps=steps,
        devices=dev_stats, phases=phases,
        memory={d: m for d, m in memory_by_device(trace, devices, step_windows).items()
                if device is None or d == device},
        host_python_by_annotation=idle.python_by_annotation(
            trace, r, host[0][host[1] == causes.index("python")]),
        host_by_cause=host_by_cause, host_base_us=iv.length(base),
        host_spans=host[0], host_codes=host[1],
        ceilings=step_figures.ceilings(steps, dev_stats, window_us, host_by_cause,
                                       iv.length(base), trace.device_kind),
    )
    explain(report, r, comm)
    advise_report(report, line_stats, loaders, cores, place)
    return report


def explain(report: Report, r: Roles, comm: np.ndarray) -> None:
    """What the advice names beside the numbers: the kind of window, what the trace lacks,
    each cause's culprits, collectives on other threads during the `python` time, the
    runtime's flavour."""
    trace = report.trace
    report.script = entry_script(trace)
    found = window_finding(trace, r, report.script, runner_window(trace.path))
    report.window_finding = found
    report.window_kind = found.kind if found is not None else "steady"
    report.lacks, report.unknown_causes = lacks(trace, r, report)
    report.culprits = culprits_by_cause(trace, r, report.devices, report.host_spans,
                                        report.host_codes, report.card_device, comm)
    dev = report.card_device("python")
    python = report.devices[dev].spans_of("python") if dev is not None else \
        report.host_spans[report.host_codes == causes.index("python")]
    report.collective_wait = collective_wait(trace, r, python, dev)
    report.runtime = runtime_flavour(trace)
    report.loader_batches = loader_batches(trace, r)


def runtime_flavour(trace: Trace) -> str:
    """"hip" when the runtime calls are ROCm's, "cuda" for CUDA's, "other" for another
    accelerator's runtime, "" without runtime calls."""
    ids = unique(trace.name[in_codes(trace.cat, RUNTIME_CATS)])
    names = [trace.names[i] for i in ids]
    for flavour, prefixes in (("hip", ("hip",)), ("cuda", ("cuda", "cu"))):
        if any(n.startswith(prefixes) for n in names):
            return flavour
    return "other" if names else ""
