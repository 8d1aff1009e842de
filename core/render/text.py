"""The CLI's readable report: headlines, idle by cause (the eight), python by annotation,
communication, ceilings, steps, memory, and the advice with what each could save."""

from __future__ import annotations

from collections.abc import Sequence

from stallscope.core import causes, units
from stallscope.core.causes import CAUSES
from stallscope.core.readers.columns import dropped_text
from stallscope.core.render.facts import (
    facts_text,
    memory_facts,
    window_kind_text,
    withheld_reason,
)
from stallscope.core.report import DeviceStats, Report
from stallscope.core.units import duration, ms, pct

_MAX_ANNOTATIONS = 5


def render(report: Report) -> str:
    t = report.trace
    lines = [f"trace   {t.path}" + (f"  (rank {t.rank})" if t.rank is not None else "")]
    source = units.plural(len(report.steps), "step") if report.steps \
        else "no ProfilerStep: all events"
    kind = "" if report.steady else f", {window_kind_text(report)}"
    lines.append(f"window  {ms(report.window_us)} ({source}{kind})")
    if report.main_thread:
        lines.append(f"main thread  pid {report.main_thread[0]} tid {report.main_thread[1]}")
    if t.dropped:
        lines.append("dropped " + dropped_text(t.dropped))
    lines += [f"lacks   {lack.text}" for lack in report.lacks if not lack.withholds]
    lines.append("")
    if not report.advisable and report.advice:  # window first, then causes
        lead = report.advice[0]
        lines += [f"!! {lead.title}", f"   {lead.evidence}", f"   {lead.fix}", ""]
    for h in report.headlines:
        lines += [f"!! {h.title}", f"   {h.evidence}"] + ([f"   {h.fix}"] if h.fix else []) + [""]
    if not report.devices:
        lines += _host(report)
    for dev, s in report.devices.items():
        lines += _device(report, dev, s)
    lines += _ceilings(report)
    lines += _steps(report)
    lines += _memory(report)
    lines += _advice(report)
    return "\n".join(lines).rstrip() + "\n"


def _table(by_cause: dict[str, float], total: float, window: float, total_name: str,
           order: Sequence[str] = CAUSES, unknown: Sequence[str] = ()) -> list[str]:
    out = [f"  {'cause':<14}{'time':>14}{total_name:>12}{'% of window':>13}"]
    for cause in order:
        us = by_cause.get(cause, 0.0)
        if cause in unknown:
            out.append(f"  {causes.label(cause):<14}{'unknown':>14}  (no CPU operators recorded)")
            continue
        out.append(f"  {causes.label(cause):<14}{ms(us):>14}"
                   f"{pct(us / total if total else 0.0):>12}"
                   f"{pct(us / window if window else 0.0):>13}")
    return out


def _annotations(by: dict[str, float]) -> list[str]:
    named = [(n or "(outside any annotation)", us) for n, us in by.items() if us > 0]
    if not named:
        return []
    out = ["  python by annotation:"]
    out += [f"    {ms(us):>12}  {name}" for name, us in named[:_MAX_ANNOTATIONS]]
    if len(named) > _MAX_ANNOTATIONS:
        rest = sum(us for _, us in named[_MAX_ANNOTATIONS:])
        out.append(f"    {ms(rest):>12}  ({len(named) - _MAX_ANNOTATIONS} more)")
    return out


def _host(report: Report) -> list[str]:
    base = report.host_base_us
    lines = ["No GPU activity in this trace: the main thread's "
             + ("step time" if report.steps else "time") + f" ({ms(base)}) by cause"]
    lines += _table(report.host_by_cause, base, report.window_us, "% of steps", CAUSES[1:],
                    report.unknown_causes)
    if "python" not in report.unknown_causes:
        lines += _annotations(report.host_python_by_annotation)
    return lines + [""]


def _device(report: Report, dev: int, s: DeviceStats) -> list[str]:
    t = report.trace
    lines = [f"{t.device_label(dev)}: utilization {pct(s.utilization):>6}   busy {ms(s.busy_us)}"
             f"   idle {ms(s.idle_us)} in {units.plural(s.idle_gaps, 'gap')}"]
    lines += _table(s.idle_by_cause, s.idle_us, report.window_us, "% of idle",
                    unknown=report.unknown_causes)
    if "python" not in report.unknown_causes:
        lines += _annotations(s.python_by_annotation)
    helpers = [t.tracks[k] for k in s.launch_tracks if k != report.main_track]
    if helpers:
        lines.append("  launching threads besides the main thread: "
                     + ", ".join(f"pid {p} tid {q}" for p, q in helpers))
    if s.comm_us > 0:
        lines.append(f"  communication {ms(s.comm_us)}, exposed {ms(s.exposed_comm_us)} "
                     f"({pct(s.exposed_comm_us / report.window_us if report.window_us else 0)} "
                     f"of the window), overlap {pct(s.comm_overlap)}")
    return lines + [""]


def _ceilings(report: Report) -> list[str]:
    if not report.advisable:
        if not any(c.speedup >= 1.01 for c in report.ceilings):
            return []
        return [f"ceilings: withheld for {withheld_reason(report)} (see the first card)", ""]
    shown = [c for c in report.quoted_ceilings if c.speedup >= 1.01 and c.cause != "uncovered"]
    if not shown:
        return []
    lines = ["ceilings (how much faster steps could be if one cause vanished)"]
    label = report.trace.device_label
    lines += [f"  {label(c.device) + ': ' if c.device is not None else ''}{c.text} "
              f"({duration(c.cause_us)} of {duration(c.base_us)})" for c in shown]
    return lines + [""]


def _steps(report: Report) -> list[str]:
    if not report.steps:
        return []
    devs = list(report.devices)
    head = f"  {'step':<20}{'duration':>13}{'data wait':>13}{'optimizer':>13}"
    label = report.trace.device_label
    head += "".join(f"{label(d) + ' busy':>14}{'top idle cause':>18}" for d in devs)
    lines = ["steps", head]
    for st in report.steps:
        row = (f"  {st.name:<20}{ms(st.dur_us):>13}{ms(st.data_loading_us):>13}"
               f"{ms(st.optimizer_us):>13}")
        for d in devs:
            by = {c: us for c, us in st.idle_by_cause.get(d, {}).items()
                  if c not in report.unknown_causes}
            top = max(by, key=by.__getitem__) if by and max(by.values()) > 0 else None
            row += f"{ms(st.gpu_busy_us[d]):>14}{causes.label(top) if top else '-':>18}"
        lines.append(row)
    return lines + [""]


def _memory(report: Report) -> list[str]:
    lines = [f"memory {report.trace.device_label(dev)}: {facts_text(facts)}"
             for dev, facts in memory_facts(report).items()]
    return lines + [""] if lines else []


def _advice(report: Report) -> list[str]:
    shown = report.advice[1:] if not report.advisable else report.advice
    lines = []
    if not report.advice:
        lines.append("advice: nothing stands out.")
    base = "the window" if report.devices else "step time"
    of = report.window_us if report.devices else report.host_base_us
    for a in shown:
        share = pct(a.saving_us / of) if of else "-"
        tag = "minor " if a.minor else ""
        lines += [f"[{a.id}] {tag}{a.title} (could save up to {duration(a.saving_us)}, "
                  f"{share} of {base})",
                  f"  evidence: {a.evidence}"]
        lines += [f"  culprit: {c.text}" for c in a.culprits]
        lines += [f"  fix: {a.fix}", ""]
    if report.withheld:
        why = withheld_reason(report) or "a cause the trace cannot know"
        lines.append(f"withheld for {why} (if this were steady):")
        lines += [f"  [{a.id}] {a.title}" for a in report.withheld]
    return lines
