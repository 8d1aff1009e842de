"""What the app opens: one trace, or a folder of several ranks' traces, loaded and analysed.

`plan(path)` decides which files a path stands for; `load_document_job` loads and analyses
them as one generator job (progress in 0..1000), so the GUI runs it in a worker and the
CLI/tests can drain it with `run_job`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from stallscope.core.advice import line_stats_near
from stallscope.core.analysis import Report, analyze
from stallscope.core.errors import TraceError
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.trace import RANK_RE, find_traces, load_job

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


def plan(path: str | os.PathLike) -> list[tuple[str, Path]]:
    """(label, trace file) pairs a path stands for; several when a folder holds several ranks."""
    p = Path(path)
    if not p.exists():
        raise TraceError(f"{p}: no such file or folder")
    if p.is_file():
        return [("", p)]
    files = find_traces(p)
    if not files:
        raise TraceError(f"{p}: folder holds no trace (*.pt.trace.json, *.json.gz)")
    by_rank: dict[int, Path] = {}
    for f in files:  # newest first: the newest trace of a rank wins
        m = RANK_RE.search(f.name)
        if m:
            by_rank.setdefault(int(m.group(1)), f)
    if len(by_rank) >= 2:
        return [(f"rank {r}", f) for r, f in sorted(by_rank.items())]
    return [("", files[0])]


def load_document_job(path: str | os.PathLike, cancel: CancelFlag | None = None) -> Job[Document]:
    """Load and analyse every trace `path` stands for. Yields (done, 1000)."""
    cancel = cancel or CancelFlag()
    files = plan(path)
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
