"""The CLI's readable report: window, utilization, idle by cause, steps, memory, advice."""

from __future__ import annotations

from stallscope.core.analysis import Report
from stallscope.core.causes import CAUSE_LABELS, CAUSES


def _ms(us: float) -> str:
    return f"{us / 1000:,.2f} ms"


def _mib(b: float | None) -> str:
    return "-" if b is None else f"{b / 2**20:,.1f} MiB"


def render(report: Report) -> str:
    t = report.trace
    lines = [f"trace   {t.path}" + (f"  (rank {t.rank})" if t.rank is not None else "")]
    lo, hi = report.window
    source = f"{len(report.steps)} steps" if report.steps else "no ProfilerStep: all events"
    lines.append(f"window  {_ms(hi - lo)} ({source})")
    if report.main_thread:
        lines.append(f"main thread  pid {report.main_thread[0]} tid {report.main_thread[1]}")
    if t.dropped:
        lines.append("dropped " + ", ".join(f"{n} {why}" for why, n in t.dropped.items()))
    lines.append("")
    if not report.devices:
        lines.append("No GPU activity in this trace: CPU lanes only.")
    for dev, s in report.devices.items():
        lines.append(f"GPU {dev}: utilization {100 * s.utilization:5.1f}%   busy {_ms(s.busy_us)}"
                     f"   idle {_ms(s.idle_us)} in {s.idle_gaps} gaps")
        lines.append(f"  {'idle cause':<14}{'time':>14}{'% of idle':>11}{'% of window':>13}")
        for cause in CAUSES:
            us = s.idle_by_cause[cause]
            of_idle = 100 * us / s.idle_us if s.idle_us else 0.0
            of_win = 100 * us / report.window_us if report.window_us else 0.0
            lines.append(f"  {CAUSE_LABELS[cause]:<14}{_ms(us):>14}"
                         f"{of_idle:>10.1f}%{of_win:>12.1f}%")
        lines.append("")
    if report.steps:
        devs = list(report.devices)
        head = f"  {'step':<20}{'duration':>13}{'data wait':>13}{'optimizer':>13}"
        head += "".join(f"{'GPU ' + d + ' busy':>14}" for d in devs)
        lines += ["steps", head]
        for st in report.steps:
            row = (f"  {st.name:<20}{_ms(st.dur_us):>13}{_ms(st.data_loading_us):>13}"
                   f"{_ms(st.optimizer_us):>13}")
            row += "".join(f"{_ms(st.gpu_busy_us[d]):>14}" for d in devs)
            lines.append(row)
        lines.append("")
    for dev, m in report.memory.items():
        if len(m.ts) == 0 and m.cuda_malloc_count == 0:
            continue
        lines.append(f"memory GPU {dev}: peak allocated {_mib(m.peak_allocated)}, peak reserved "
                     f"{_mib(m.peak_reserved)}, reserved shrank {m.reserved_drops}x, "
                     f"cudaMalloc {m.cuda_malloc_count}x ({_ms(m.cuda_malloc_us)}), "
                     f"cudaFree {m.cuda_free_count}x ({_ms(m.cuda_free_us)})")
    lines.append("")
    if not report.advice:
        lines.append("advice: nothing stands out.")
    for a in report.advice:
        lines += [f"[{a.id}] {a.title}", f"  evidence: {a.evidence}", f"  fix: {a.fix}", ""]
    return "\n".join(lines).rstrip() + "\n"
