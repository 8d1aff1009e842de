"""A folder of ranks analysed as one job: the tasks (local pool or Dask), then the stragglers.

    result = run_job(analyze_ranks_job(plan.picks, plan=plan))   # or scheduler="tcp://..."
    result.to_json()   # {"folder": picks/runs/skips, "traces": [per rank], "stragglers": {...}}

The JSON holds nothing about how it was computed (workers, cluster), so local and Dask agree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from stallscope.core.errors import StallscopeError
from stallscope.core.folder import FolderPlan
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.ranks.pool import Result, Task, run_local
from stallscope.core.ranks.stragglers import Stragglers, stragglers
from stallscope.core.ranks.tasks import RankFailure, RankSummary


@dataclass
class RankJob:
    tasks: list[Task]
    summaries: list[RankSummary]       # analysed ranks, in task (rank) order
    failures: list[RankFailure]        # ranks that could not be analysed, with why
    stragglers: Stragglers | None      # None when the traces are not ranks of one job (--all)
    plan: FolderPlan | None = None

    def to_json(self) -> dict:
        out: dict = {}
        if self.plan is not None:
            folder = self.plan.to_json()
            folder["skipped"] += [{"path": f.path, "reason": f"could not be analysed: "
                                   f"{f.message}"} for f in self.failures]
            out["folder"] = folder
        out["traces"] = [s.to_json() for s in self.summaries]
        if self.stragglers is not None:
            out["stragglers"] = self.stragglers.to_json()
        out["failed"] = [f.to_json() for f in self.failures]
        return out


def analyze_ranks_job(picks: Sequence[tuple[str, str | Path]], workers: int | None = None,
                      scheduler: str | None = None, cancel: CancelFlag | None = None,
                      on_result: Callable[[int, Result], None] | None = None,
                      plan: FolderPlan | None = None, compare: bool = True,
                      device: int | None = None) -> Job[RankJob]:
    """Analyse every (label, path) pick (FolderPlan.picks); yields (done, total).
    `compare=False` skips the straggler table (traces that are not one job's ranks). Raises
    when no task succeeds."""
    tasks: list[Task] = [(label, str(Path(path).absolute())) for label, path in picks]
    if scheduler:
        from stallscope.core.ranks.cluster import run_dask

        results = yield from run_dask(tasks, scheduler, cancel, on_result, device)
    else:
        results = yield from run_local(tasks, workers, cancel, on_result, device)
    summaries = [r for r in results if isinstance(r, RankSummary)]
    failures = [r for r in results if isinstance(r, RankFailure)]
    if not summaries:
        first = failures[0].message if failures else "no trace to analyse"
        more = f" (and {len(failures) - 1} more failed)" if len(failures) > 1 else ""
        raise StallscopeError(first + more)
    table = stragglers(summaries) if compare else None
    return RankJob(tasks, summaries, failures, table, plan)
