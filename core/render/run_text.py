"""The whole run as text: `stallscope-cli analyze SESSION` prints it after the trace's report
(cli.main escapes control characters in whatever reaches the terminal).

    sys.stdout.write(render_run(analyze_run(record)))
"""

from __future__ import annotations

from stallscope.core.session.stalls import RunReport, s_text
from stallscope.core.units import duration, pct, plural, size


def render_run(run: RunReport) -> str:
    steady = (f"{duration(run.step_ms * 1e3)} per step over the {run.steady_steps:,} after "
              "the warm-up (elapsed / steps)" if run.step_ms == run.step_ms
              else "no steady steps")
    lines = [f"whole run  {plural(run.steps, 'step')} in {s_text(run.wall_s)}: {steady}, "
             f"data wait {pct(run.data_wait_share)} of that time (epoch starts apart)"
             + (f", {plural(run.epochs, 'epoch')}" if run.epochs else "")
             + (f", {plural(run.saves, 'save')}" if run.saves else "")]
    if run.first_full > 0:
        lines.append(f"           steps before {run.first_full:,} kept as block summaries; "
                     f"record {size(run.record_bytes)}")
    if run.windows:
        shown = ", ".join(f"{w['steps'][0]}-{w['steps'][1]}" for w in run.windows[:8])
        more = f" and {len(run.windows) - 8} more" if len(run.windows) > 8 else ""
        lines.append(f"profiled   {plural(len(run.windows), 'window')}: steps {shown}{more}")
    lines.append("")
    if not run.stalls:
        lines.append("No stall over the whole run (epoch starts, saves, validation, time "
                     "between steps, slow-down each under 1% of wall time).")
    for i, s in enumerate(run.stalls, 1):
        lines.append(f"{i}. {s.title}")
        lines.append(f"   {s.evidence}")
        lines.append(f"   costs {s_text(s.cost_s)} ({pct(s.share)} of the run)"
                     + (f"; the fix saves {s_text(s.saving_s)}" if s.saving_s > 0 else ""))
    return "\n".join(lines).rstrip() + "\n"
