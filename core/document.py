"""What the app opens: one trace, or a folder of several ranks' traces, loaded and analysed.

`plan(path)` decides which files a path stands for (the folder rules are core/folder.py's);
`load_document_job` loads and analyses them as one generator job (progress in 0..1000), so the
GUI runs it in a worker and the CLI/tests can drain it with `run_job`. A folder of many ranks is
better opened as summaries (core/ranks): this keeps every rank's full Trace.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from stallscope.core.advice import line_stats_near
from stallscope.core.analysis import Report, analyze
from stallscope.core.errors import NoTraceInFolder, TraceError
from stallscope.core.folder import FolderPlan, plan_folder
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.trace import load_job

_LOAD_SHARE = 0.9  # of each file's progress share; the rest is analysis


@dataclass
class Document:
    """An opened trace or multi-rank folder: one Report per rank, in rank order."""

    path: Path
    reports: list[Report]
    labels: list[str]

    @property
    def multi_rank(self) -> bool:
        return len(self.reports) > 1

    @property
    def title(self) -> str:
        return self.path.name or str(self.path)


def plan(path: str | os.PathLike, run: str | None = None) -> list[tuple[str, Path]]:
    """(label, trace file) pairs a path stands for; several when a folder holds a job's ranks."""
    p = Path(path)
    if p.is_dir():
        return plan_path(p, run).picks
    if not p.exists() and not p.is_symlink():
        raise TraceError(f"{p}: no such file or folder")
    return [("", p)]  # a file of any kind: the loader names what is wrong with it


def plan_path(path: str | os.PathLike, run: str | None = None,
              every: bool = False) -> FolderPlan:
    """The folder plan (picks, runs, skips with reasons); a session without a trace says why."""
    p = Path(path)
    try:
        return plan_folder(p, run=run, every=every)
    except NoTraceInFolder:
        from stallscope.core.session.reader import no_trace_reason

        reason = no_trace_reason(p)
        if reason:  # "<session>: <why>": the script's exception, no finished record...
            why = reason.removeprefix(f"{p}: ")
            raise NoTraceInFolder(f"{p}: folder holds no trace: {why}") from None
        raise


def load_document_job(path: str | os.PathLike, cancel: CancelFlag | None = None,
                      files: list[tuple[str, Path]] | None = None) -> Job[Document]:
    """Load and analyse every trace `path` stands for (`files`: its plan, when the caller made
    it already). Yields (done, 1000)."""
    cancel = cancel or CancelFlag()
    files = plan(path) if files is None else files
    sizes = [max(f.stat().st_size, 1) for _, f in files]
    total = float(sum(sizes))
    reports, labels = [], []
    offset = 0.0
    for (label, f), size in zip(files, sizes, strict=True):
        share = size / total
        job = load_job(f, cancel)
        try:
            while True:
                done, of = next(job)
                frac = offset + share * _LOAD_SHARE * (done / of if of else 1.0)
                yield int(1000 * frac), 1000
        except StopIteration as stop:
            trace = stop.value
        cancel.check()
        report = analyze(trace, line_stats=line_stats_near(f))
        reports.append(report)
        labels.append(label or (f"rank {trace.rank}" if trace.rank is not None else f.name))
        offset += share
        yield int(1000 * offset), 1000
    return Document(path=Path(path), reports=reports, labels=labels)
