"""Save a report as JSON (Report.to_json, the CLI's names) or Markdown; a comparison too."""

from __future__ import annotations

import os
from pathlib import Path

from stallscope.core import causes
from stallscope.core.causes import CAUSES
from stallscope.core.compare import Metric, primary_device
from stallscope.core.errors import StallscopeError
from stallscope.core.render.facts import (
    facts_text,
    json_text,
    memory_facts,
    window_text,
    withheld_reason,
)
from stallscope.core.report import Report
from stallscope.core.units import count, duration, ms, pct

FORMATS = {".json": "json", ".md": "markdown", ".markdown": "markdown"}


def report_to_json(report: Report) -> str:
    return json_text(report.to_json())


def _pct_of(us: float, total: float) -> str:
    return pct(us / total) if total > 0 else "-"


def report_to_markdown(report: Report, title: str | None = None) -> str:
    trace = report.trace
    lines = [f"# {title or 'stallscope report: ' + Path(str(trace.path)).name}", ""]
    lines.append(f"- trace: `{trace.path}`" + (f" (rank {trace.rank})"
                                              if trace.rank is not None else ""))
    lines.append(f"- window: {window_text(report)}")
    lines += [f"- lacks: {lack.text}" for lack in report.lacks]
    lines.append("")
    for h in report.headlines:
        lines += [f"> **{h.title}**: {h.evidence} {h.fix}".rstrip(), ""]
    lines += _gpu_section(report)
    lines += _ceiling_section(report)
    lines += _step_section(report)
    mem = memory_facts(report)
    if mem:
        lines += ["## Memory", ""]
        lines += [f"- {trace.device_label(dev)}: {facts_text(facts)}" for dev, facts in mem.items()]
        lines.append("")
    lines += ["## Advice", ""]
    if not report.advice:
        lines.append("Nothing stands out.")
    of = report.window_us if report.devices else report.host_base_us
    for a in report.advice:
        minor = " (minor)" if a.minor else ""
        lines += [f"### {a.title}{minor}", "",
                  f"- could save: {duration(a.saving_us)} ({_pct_of(a.saving_us, of)} of "
                  f"{'the window' if report.devices else 'step time'})",
                  f"- evidence: {a.evidence}"]
        lines += [f"- culprit: `{c.name}` ×{c.count:,}, {duration(c.covered_us)}"
                  + (f": {c.detail}" if c.detail else "")
                  + (f" (at `{c.frame}`)" if c.frame else "") for c in a.culprits]
        lines += [f"- fix: {a.fix}", ""]
    if report.withheld:
        why = withheld_reason(report) or "a cause the trace cannot know"
        lines += [f"### Withheld for {why} (if this were steady)", ""]
        lines += [f"- {a.title} (`{a.id}`, {duration(a.saving_us)}): {a.fix}"
                  for a in report.withheld]
    return "\n".join(lines).rstrip() + "\n"


def _gpu_section(report: Report) -> list[str]:
    if not report.devices:  # queued GPU work cannot happen without a GPU
        host = CAUSES[1:]
        return ["## Main thread", "",
                "No GPU activity in this trace: the main thread's "
                + ("step time" if report.steps else "time") + " by cause.", "",
                "| " + " | ".join(causes.label(c) for c in host) + " |",
                "|---" * len(host) + "|",
                "| " + " | ".join("unknown" if c in report.unknown_causes
                                  else ms(report.host_by_cause.get(c, 0.0)) for c in host)
                + " |", ""]
    lines = [f"## {report.trace.device_kind}", ""]
    lines.append("| device | utilization | busy | idle | gaps | "
                 + " | ".join(f"idle: {causes.label(c)}" for c in CAUSES)
                 + " | communication | exposed | overlap |")
    lines.append("|---" * (8 + len(CAUSES)) + "|")
    for dev, s in report.devices.items():
        idle_cells = " | ".join("unknown" if c in report.unknown_causes
                                else ms(s.idle_by_cause.get(c, 0.0)) for c in CAUSES)
        lines.append(f"| {report.trace.device_label(dev)} | {pct(s.utilization)} | "
                     f"{ms(s.busy_us)} | {ms(s.idle_us)} | {count(s.idle_gaps)} | {idle_cells} | "
                     f"{ms(s.comm_us)} | {ms(s.exposed_comm_us)} | {pct(s.comm_overlap)} |")
    lines.append("")
    for dev, s in report.devices.items():
        named = [(n or "(outside any annotation)", us)
                 for n, us in s.python_by_annotation.items() if us > 0][:5]
        if named:
            lines.append(f"Python time on {report.trace.device_label(dev)}'s idle, by annotation: "
                         + ", ".join(f"`{n}` {ms(us)}" for n, us in named))
            lines.append("")
    return lines


def _ceiling_section(report: Report) -> list[str]:
    if not report.advisable:
        if not any(c.speedup >= 1.01 for c in report.ceilings):
            return []
        return ["## Ceilings", "", f"Withheld for {withheld_reason(report)}.", ""]
    shown = [c for c in report.quoted_ceilings if c.speedup >= 1.01 and c.cause != "uncovered"]
    if not shown:
        return []
    label = report.trace.device_label
    return ["## Ceilings", ""] + [
        f"- {label(c.device) + ': ' if c.device is not None else ''}{c.text}" for c in shown
    ] + [""]


def _step_section(report: Report) -> list[str]:
    if not report.steps:
        return []
    dev = primary_device(report)
    busy = "" if dev is None else f" {report.trace.device_label(dev)} busy |"
    top_of = "largest idle cause" if dev is not None else "largest cause"
    lines = ["## Steps", "", f"| step | duration | data loading | optimizer |{busy} {top_of} |",
             "|---" * (5 + bool(busy)) + "|"]
    for st in report.steps:
        busy = f" {ms(st.gpu_busy_us.get(dev, 0.0))} |" if dev is not None else ""
        by = st.idle_by_cause.get(dev, {}) if dev is not None else st.host_by_cause
        top = max(by, key=by.__getitem__) if by and max(by.values()) > 0 else None
        lines.append(f"| {st.name} | {ms(st.dur_us)} | {ms(st.data_loading_us)} | "
                     f"{ms(st.optimizer_us)} |{busy} {causes.label(top) if top else '-'} |")
    return lines + [""]


def comparison_to_markdown(metrics: list[Metric], before: str, after: str) -> str:
    lines = [f"# Before / after: {before} → {after}", "",
             "| metric | before | after | change | verdict |", "|---|---|---|---|---|"]
    for m in metrics:
        lines.append(f"| {m.label} | {m.value_text(m.before)} | {m.value_text(m.after)} "
                     f"| {m.change_text()} | {m.verdict} |")
    return "\n".join(lines) + "\n"


def save_report(report: Report, path: str | os.PathLike) -> Path:
    """Write JSON or Markdown by the file's suffix; raise StallscopeError naming the file."""
    p = Path(path)
    kind = FORMATS.get(p.suffix.lower())
    if kind is None:
        raise StallscopeError(f"{p}: unknown report format (use .json or .md)")
    text = report_to_json(report) if kind == "json" else report_to_markdown(report)
    try:
        p.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise StallscopeError(f"{p}: cannot write report ({exc.strerror or exc})") from exc
    return p
