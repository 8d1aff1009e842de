"""The whole run as text: `stallscope-cli analyze SESSION` prints it after the trace's report
(cli.main escapes control characters in whatever reaches the terminal).

    sys.stdout.write(render_run(analyze_run(record)))
"""

from __future__ import annotations

from stallscope.core.session.stalls import RunReport, s_text
from stallscope.core.session.steady import LINEPROF_NOTE, short_text
from stallscope.core.units import duration, pct, plural, size


def render_run(run: RunReport) -> str:
    lines = [f"whole run  {plural(run.steps, 'step')} in {s_text(run.wall_s)} by the record's "
             f"clock (start-up to step 0's end {s_text(run.startup_s)}, then "
             f"{s_text(run.elapsed_s)})"
             + (f", {plural(run.epochs, 'epoch')}" if run.epochs else "")
             + (f", {plural(run.saves, 'save')}" if run.saves else ""),
             f"steady     {steady_text(run)}"]
    if run.lineprof:
        lines.append(f"           {LINEPROF_NOTE}")
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


def steady_text(run: RunReport) -> str:
    """The one steady figure, as the run header and `analyze` state it: '737.7 µs per step over
    998,976 steps after the warm-up (elapsed / steps); data wait 3.1% incl. epoch starts (2.0%
    in steady steps only)'."""
    if run.step_ms != run.step_ms:
        return "no steady steps"
    wait = wait_text(run.data_wait_share, run.steps_only_wait_share)
    return (f"{duration(run.step_ms * 1e3)} per step over {plural(run.steady_steps, 'step')} "
            f"after the warm-up (elapsed / steps); {wait}"
            + short_text(run.steady_reached, run.steady_profiled))


def wait_text(share: float, steps_only: float) -> str:
    """'data wait 25.0% incl. epoch starts (12.4% in steady steps only)': what each covers."""
    text = f"data wait {pct(share)} incl. epoch starts"
    if abs(share - steps_only) >= 0.0005:
        text += f" ({pct(steps_only)} in steady steps only)"
    return text
