"""The rank table as text (the CLI's `analyze RUN_DIR`), over the same RankJob as the JSON."""

from __future__ import annotations

from stallscope.core import causes, units
from stallscope.core.ranks.job import RankJob
from stallscope.core.ranks.stragglers import Stragglers, stragglers
from stallscope.core.ranks.tasks import RankSummary, summarize
from stallscope.core.report import Report

HEADERS = ("rank", "step", "GPU util.", "exposed comm", "held others up/step", "waited/step",
           "last", "largest idle cause")


def rank_rows(job: RankJob) -> list[tuple[str, ...]]:
    """One row per analysed rank, the ones the others waited for longest first."""
    by_key = {s.key: s for s in job.summaries}
    order = job.stragglers.order() if job.stragglers else list(by_key)
    figures = job.stragglers.ranks if job.stragglers else {}
    per = max(len(job.stragglers.steps), 1) if job.stragglers else 1
    rows: list[tuple[str, ...]] = []
    for key in order:
        s = by_key[key]
        fig = figures.get(key)
        rows.append((key, units.ms(1000 * s.step_ms()), _util(s), _exposed(s),
                     units.duration(fig.held_up_us / per) if fig else "-",
                     units.duration(fig.waited_us / per) if fig else "-",
                     str(fig.last_count) if fig else "-", top_cause(s)))
    return rows


def _util(s: RankSummary) -> str:
    dev = s.device_json()
    return "-" if dev is None else units.pct(dev["utilization"])


def _exposed(s: RankSummary) -> str:
    """Exposed communication as a share of the window."""
    dev = s.device_json()
    lo, hi = s.report["window_us"]
    if dev is None or "exposed_comm_us" not in dev or hi <= lo:
        return "-"
    return units.pct(dev["exposed_comm_us"] / (hi - lo))


def top_cause(s: RankSummary) -> str:
    """The largest idle cause per step: "data loading 20.01 ms/step"."""
    cause, dev = s.largest_cause(), s.device_json()
    if cause is None or dev is None:
        return "-"
    us = dev["idle_by_cause"][cause]
    if s.steps:
        return f"{causes.label(cause)} {units.duration(us / len(s.steps))}/step"
    return f"{causes.label(cause)} {units.duration(us)}"


def straggler_sentence(table: Stragglers) -> str:
    """Who the others waited for, how long and why: the CLI's line and the app's."""
    return "Straggler: " + (table.slowest.text if table.slowest else
                            "none (no rank made the others wait)")


def rank_stragglers(reports: list[Report], labels: list[str]) -> Stragglers:
    """The straggler table of ranks loaded in full (the app's small jobs), as the rank
    tasks compute it."""
    return stragglers([summarize(r, label) for r, label in zip(reports, labels, strict=True)])


def render_job(job: RankJob) -> str:
    lines = list(job.plan.lines()) if job.plan is not None else []
    for f in job.failures:
        lines.append(f"  skipped {f.path} (could not be analysed: {f.message})")
    n = len(job.summaries)
    world = {s.world_size for s in job.summaries} - {None}
    of = f" of world size {world.pop()}" if len(world) == 1 else ""
    lines.append("")
    st = job.stragglers
    steps = f" over {units.plural(len(st.steps), 'compared step')}" if st and st.steps else ""
    lines.append(f"{units.plural(n, 'rank')}{of}{steps}; the rank the others waited for "
                 "longest first:")
    rows = [HEADERS, *rank_rows(job)]
    widths = [max(len(r[c]) for r in rows) for c in range(len(HEADERS))]
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [r[c].rjust(widths[c]) for c in range(1, len(r) - 1)]
        lines.append("  " + "  ".join(cells) + "  " + r[-1])
    if st is not None:
        lines.append("")
        lines.append(straggler_sentence(st))
        lines += [f"  note: {n}" for n in st.notes]
    lines.append("")
    lines.append("One rank in full: stallscope-cli analyze FILE (files are listed with --json "
                 "under folder.picked)")
    return "\n".join(lines) + "\n"
