"""What the app opens: one trace, or a folder of several ranks' traces, loaded and analysed.

`open_as(path)` decides what a path opens as (a trace, a session, a job's ranks, every trace of
a folder), once for the app and the CLI: both only display its answer. `plan(path)` is the files
a path stands for (the folder rules are core/folder.py's);
`analyze_path` loads one trace, finds the line stats of its session and analyses it (the CLI,
`run`'s summary and the rank tasks); `load_document_job` does that for every file a path
stands for as one generator job (progress in 0..1000), so the GUI runs it in a worker and the
CLI/tests can drain it with `run_job`. The line stats read for the advice stay on the Document
for the heatmap. A folder of many ranks is better opened as summaries (core/ranks): this keeps
every rank's full Trace.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from stallscope.core.analysis import analyze
from stallscope.core.errors import StallscopeError, TraceError
from stallscope.core.folder import FolderPlan, plan_folder
from stallscope.core.jobs import CancelFlag, Job, run_job
from stallscope.core.lineprof import SessionStats, session_of, session_stats
from stallscope.core.report import Report
from stallscope.core.session.reader import is_session, open_session, session_of_trace
from stallscope.core.trace import load_job

_LOAD_SHARE = 0.9  # of each file's progress share; the rest is analysis
RANKS_IN_FULL = 8  # a job of at most this many ranks is small enough to load every rank in full

# What a path opens as (Opening.kind)
TRACE = "trace"      # one trace: a file, or the newest trace of a log folder
SESSION = "session"  # a stallscope session folder: its trace (if any yet) and its whole run
RANKS = "ranks"      # a job's ranks: the rank table (and, when small, every rank in full)
TRACES = "traces"    # every trace of a folder (--all), each summarised


@dataclass(frozen=True)
class Opening:
    """What a path opens as, decided by open_as for the app and the CLI alike."""

    kind: str
    path: Path
    plan: FolderPlan | None = None  # a folder's plan; None for a file, or a session without
    session: Path | None = None     # the session folder whose whole run goes with it
    no_trace: str = ""              # a session without a trace: why (the folder rules' line)

    @property
    def files(self) -> list[tuple[str, Path]]:
        """(label, trace file) pairs to load; [] for a session that has no trace yet."""
        if self.plan is not None:
            return self.plan.picks
        return [] if self.kind == SESSION else [("", self.path)]

    @property
    def in_full(self) -> bool:
        """Few enough traces to load each one in full (a job of many ranks: summaries)."""
        return len(self.files) <= RANKS_IN_FULL


def open_as(path: str | os.PathLike, run: str | None = None, every: bool = False) -> Opening:
    """The one rule for what a path opens as. Raises StallscopeError (one line naming the
    path) when it opens as nothing."""
    p = Path(path)
    if not p.is_dir():
        if run:
            raise StallscopeError(f"{p}: --run chooses among the runs of a folder; this is a "
                                  "file")
        plan(p)  # a missing path: one line
        return Opening(TRACE, p)
    session = p if is_session(p) else None
    try:
        folder = plan_path(p, run=run, every=every)
    except StallscopeError as exc:
        if session is not None:  # no trace (yet): its run alone
            return Opening(SESSION, p, None, session, no_trace=str(exc))
        raise
    if len(folder.picks) > 1:
        return Opening(TRACES if every else RANKS, p, folder, session)
    return Opening(SESSION if session is not None else TRACE, p, folder, session)


@dataclass
class Document:
    """An opened trace or multi-rank folder: one Report per rank, in rank order, and the line
    stats of the session it belongs to (read once: the advice had them, the heatmap shows
    them)."""

    path: Path
    reports: list[Report]
    labels: list[str]
    line_stats: SessionStats = field(default_factory=SessionStats)
    opening: Opening | None = None  # what its path opened as (open_as), when it was asked

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
    """The folder plan (picks, runs, skips with reasons): core/folder.plan_folder's."""
    return plan_folder(path, run=run, every=every)


def analyze_path(path: str | os.PathLike, device: int | None = None,
                 cancel: CancelFlag | None = None) -> Report:
    """Load the trace `path` stands for and analyse it with its session's line stats."""
    return run_job(analyze_job(path, device, cancel))


def analyze_job(path: str | os.PathLike, device: int | None = None,
                cancel: CancelFlag | None = None,
                line_stats: SessionStats | None = None) -> Job[Report]:
    """analyze_path as a job (yields loading's (done, 1000)); `line_stats`: the session's, when
    the caller read them already."""
    trace = yield from load_job(path, cancel)
    (cancel or CancelFlag()).check()
    stats = session_stats(trace.path) if line_stats is None else line_stats
    loaders, cores, place = session_facts(trace.path)
    return analyze(trace, device, stats.for_advice, loaders, cores, place)


def session_loaders(trace_path: str | os.PathLike) -> list[dict]:
    """The DataLoaders of the session a trace was recorded in (run.json); [] outside one."""
    return session_facts(trace_path)[0]


def session_facts(trace_path: str | os.PathLike) -> tuple[list[dict], int | None, str]:
    """What the session a trace was recorded in says that the advice uses: its DataLoaders,
    the recording machine's usable CPUs (run.json; None when not recorded) and where it ran
    (`place_options`). ([], None, "") outside a session."""
    session = session_of_trace(trace_path)
    if session is None:
        return [], None, ""
    try:
        s = open_session(session)
        cores = s.run.get("cpu_count")
        valid = isinstance(cores, int) and not isinstance(cores, bool) and 0 < cores < 1 << 20
        return s.loaders(), cores if valid else None, place_options(s.run)
    except StallscopeError:
        return [], None, ""


def place_options(run: dict) -> str:
    """The CLI options that run the session's script where it ran, for the commands the
    advice prints ("--host gpu-box --remote-python ~/envs/cuda/bin/python --remote-cwd
    /home/me/proj "): empty for a run on this machine. run.json's `remote` (core/launch)
    and `cwd` (the script's folder there); the values are shell-quoted (they come from a
    file, and are shown for pasting, never run)."""
    remote = run.get("remote")
    if not isinstance(remote, dict):
        return ""
    host = remote.get("host")
    if not isinstance(host, str) or not host:
        return ""
    words = ["--host", host]
    python = remote.get("python")
    if isinstance(python, str) and python and python != "python3":
        words += ["--remote-python", python]
    cwd = run.get("cwd")
    if isinstance(cwd, str) and cwd:
        words += ["--remote-cwd", cwd]
    return shlex.join(words) + " "


def load_document_job(path: str | os.PathLike, cancel: CancelFlag | None = None,
                      files: list[tuple[str, Path]] | None = None) -> Job[Document]:
    """Load and analyse every trace `path` stands for (`files`: its plan, when the caller made
    it already). Yields (done, 1000)."""
    cancel = cancel or CancelFlag()
    files = plan(path) if files is None else files
    sizes = [max(f.stat().st_size, 1) for _, f in files]
    total = float(sum(sizes))
    stats = _StatsBySession()
    reports, labels = [], []
    offset = 0.0
    for (label, f), size in zip(files, sizes, strict=True):
        share = size / total
        job = analyze_job(f, None, cancel, stats.of(f))
        try:
            while True:
                done, of = next(job)
                frac = offset + share * _LOAD_SHARE * (done / of if of else 1.0)
                yield int(1000 * frac), 1000
        except StopIteration as stop:
            report = stop.value
        trace = report.trace
        reports.append(report)
        labels.append(label or (f"rank {trace.rank}" if trace.rank is not None else f.name))
        offset += share
        yield int(1000 * offset), 1000
    return Document(path=Path(path), reports=reports, labels=labels,
                    line_stats=stats.of(Path(path)))


class _StatsBySession:
    """Each session's line stats read once, whichever of its traces asks."""

    def __init__(self) -> None:
        self._read: dict[Path | None, SessionStats] = {None: SessionStats()}

    def of(self, path: Path) -> SessionStats:
        session = session_of(path)
        if session not in self._read:
            self._read[session] = session_stats(session)
        return self._read[session]
