"""Save a report as JSON (Report.to_json, the CLI's names) or Markdown; a comparison too."""

from __future__ import annotations

import json
import os
from pathlib import Path

from stallscope.core.analysis import Report
from stallscope.core.causes import CAUSE_LABELS, CAUSES
from stallscope.core.compare import Metric, primary_device, step_ms
from stallscope.core.errors import StallscopeError

FORMATS = {".json": "json", ".md": "markdown", ".markdown": "markdown"}


def _ms(us: float) -> str:
    return f"{us / 1000:,.2f} ms"


def _mib(b: float | None) -> str:
    return "-" if b is None else f"{b / 2**20:,.1f} MiB"


def report_to_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2, default=_json_default) + "\n"


def _json_default(value):
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def report_to_markdown(report: Report, title: str | None = None) -> str:
    trace = report.trace
    lo, hi = report.window
    lines = [f"# {title or 'stallscope report: ' + Path(str(trace.path)).name}", ""]
    lines.append(f"- trace: `{trace.path}`" + (f" (rank {trace.rank})"
                                              if trace.rank is not None else ""))
    lines.append(f"- window: {_ms(hi - lo)}, {len(report.steps)} steps, "
                 f"mean step {step_ms(report):,.2f} ms")
    lines.append("")
    lines.append("## GPU")
    lines.append("")
    if not report.devices:
        lines += ["No GPU activity in this trace: only the CPU main thread was recorded.", ""]
    else:
        lines.append("| device | utilization | busy | idle | gaps | "
                     + " | ".join(f"idle: {CAUSE_LABELS[c]}" for c in CAUSES) + " |")
        lines.append("|---" * (5 + len(CAUSES)) + "|")
        for dev, s in report.devices.items():
            causes = " | ".join(_ms(s.idle_by_cause.get(c, 0.0)) for c in CAUSES)
            lines.append(f"| GPU {dev} | {100 * s.utilization:.1f}% | {_ms(s.busy_us)} | "
                         f"{_ms(s.idle_us)} | {s.idle_gaps} | {causes} |")
        lines.append("")
    if report.steps:
        dev = primary_device(report)
        lines += ["## Steps", "", "| step | duration | data loading | optimizer | GPU busy |",
                  "|---|---|---|---|---|"]
        for st in report.steps:
            busy = _ms(st.gpu_busy_us.get(dev, 0.0)) if dev is not None else "-"
            lines.append(f"| {st.name} | {_ms(st.dur_us)} | {_ms(st.data_loading_us)} | "
                         f"{_ms(st.optimizer_us)} | {busy} |")
        lines.append("")
    mem = [(d, m) for d, m in report.memory.items() if len(m.ts) or m.cuda_malloc_count]
    if mem:
        lines += ["## Memory", ""]
        for dev, m in mem:
            lines.append(f"- GPU {dev}: peak allocated {_mib(m.peak_allocated)}, peak reserved "
                         f"{_mib(m.peak_reserved)}, reserved shrank {m.reserved_drops}x, "
                         f"cudaMalloc {m.cuda_malloc_count}x, cudaFree {m.cuda_free_count}x")
        lines.append("")
    lines += ["## Advice", ""]
    if not report.advice:
        lines.append("Nothing stands out.")
    for a in report.advice:
        lines += [f"### {a.title}", "", f"- evidence: {a.evidence}", f"- fix: {a.fix}", ""]
    return "\n".join(lines).rstrip() + "\n"


def comparison_to_markdown(metrics: list[Metric], before: str, after: str) -> str:
    lines = [f"# Before / after: {before} → {after}", "",
             "| metric | before | after | change | verdict |", "|---|---|---|---|---|"]
    for m in metrics:
        b = "-" if m.before is None else f"{m.before:,.2f} {m.unit}".strip()
        a = "-" if m.after is None else f"{m.after:,.2f} {m.unit}".strip()
        d = "-" if m.delta is None else f"{m.delta:+,.2f} {m.unit}".strip()
        if m.rel is not None:
            d += f" ({100 * m.rel:+.0f}%)"
        lines.append(f"| {m.label} | {b} | {a} | {d} | {m.verdict} |")
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
