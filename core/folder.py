"""Which traces a folder stands for: rules a user can predict, and a plan that states them.

Every file below the folder is either picked or skipped with its reason:

1. Candidates are regular files named `*.json` or `*.json.gz` (any case). Anything else is
   skipped ("not a trace file by name"); so are files that are not regular (a FIFO, a device),
   hidden files (a trace still being written is `.<name>.part`), files that cannot be read, and
   JSON whose first MiB holds no `traceEvents` list. In a session folder (run.json or
   events*.jsonl at its top) the runner's own records (run.json, events*.jsonl, stdout.log,
   tune.json, lineprof/) are skipped as such.
2. A candidate's rank is `distributedInfo.rank` from the file's head, else `rank<N>` in its name;
   its job signature is the rest of `distributedInfo`: backend, world size, process-group count
   and NCCL version (unknown parts stay unknown).
3. A candidate's time is Kineto's timestamp in its name first (`<worker>.<epoch ms>.pt.trace.json`,
   the runner's `<script>.<YYYYmmdd-HHMMSS-mmm>`, or `Mon_DD_HH_MM_SS` with the year of the file's
   mtime), else the trace's own clock when it is wall-clock time (`baseTimeNanoseconds` plus the
   first event's `ts`: the base is when the clock started, the same for every trace of one boot;
   or the first `ts` alone when it reads as a date in 2000-2100), else the file's mtime.
4. Runs: files in one folder (relative to the opened one) belong to one run folder. In a run
   folder, ranked files form jobs: same job signature, and times no more than JOB_GAP_S apart from
   the next file of the job (sorted by time). Unranked files of a folder form one single-trace
   run. A job keeps each rank's newest trace (the older ones are skipped, named); a single-trace
   run keeps its newest trace.
5. The newest run is picked (by its newest file), unless `run` names one: its number as listed
   (1 = newest) or its folder. The other runs are listed with how to choose them (`--run`).
6. `every=True` (`analyze --all`) analyses every candidate trace of every run; non-traces are
   still listed as skipped.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from stallscope.core import units
from stallscope.core.capture import layout
from stallscope.core.errors import NoTraceInFolder, TraceError
from stallscope.core.files import kind_of
from stallscope.core.readers.head import (
    distributed_info,
    file_time,
    looks_like_trace,
    rank_in_name,
    read_head,
)
from stallscope.core.session.reader import is_session, no_trace_reason

JOB_GAP_S = 600.0         # ranks of one job were recorded within 10 minutes of each other
MAX_FILES = 20_000        # a folder scan stops here (and says so)


@dataclass(frozen=True)
class Candidate:
    """A file that looks like a trace, with what its name and head say."""

    path: Path
    folder: str              # its run folder, relative to the opened folder ("." for itself)
    rank: int | None
    world_size: int | None
    time: float              # epoch seconds
    time_source: str         # "name", "trace" (the trace's own wall clock) or "mtime"
    job: tuple = ()          # distributedInfo's backend, world size, group count, NCCL version

    def to_json(self) -> dict:
        return {"path": str(self.path), "rank": self.rank, "world_size": self.world_size,
                "time": self.time, "time_source": self.time_source}


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str

    def to_json(self) -> dict:
        return {"path": str(self.path), "reason": self.reason}


@dataclass
class Run:
    """One job (several ranks) or the single traces of one folder."""

    folder: str
    kind: str                          # "job" or "traces"
    files: list[Candidate]             # ranks in rank order; or traces, newest first
    older: list[Skipped] = field(default_factory=list)  # superseded traces of the run
    world_size: int | None = None
    name: str = ""

    @property
    def time(self) -> float:
        return max(c.time for c in self.files)

    @property
    def picks(self) -> list[Candidate]:
        return self.files if self.kind == "job" else self.files[:1]

    def describe(self) -> str:
        when = _when(self.time)
        if self.kind == "job":
            n = len(self.files)
            ws = f" of world size {self.world_size}" if self.world_size else ""
            return f"{units.plural(n, 'rank')}{ws}, recorded {when}"
        return f"{units.plural(len(self.files), 'trace')}, newest recorded {when}"


@dataclass
class FolderPlan:
    root: Path
    runs: list[Run]                    # newest first; names are 1-based numbers and folders
    chosen: int | None                 # index into runs; None with every=True
    skipped: list[Skipped]             # not traces (plus superseded traces, see all_skipped)
    every: bool = False
    truncated: bool = False

    @property
    def picks(self) -> list[tuple[str, Path]]:
        """(label, file) pairs to analyse: a job's ranks in rank order, else one trace."""
        if self.every:
            files = [c for run in self.runs for c in run.files]
            return [("" if len(files) == 1 else c.path.name, c.path) for c in files]
        if self.chosen is None:
            return []
        picks = self.runs[self.chosen].picks
        return [(_label(c, len(picks)), c.path) for c in picks]

    @property
    def traces(self) -> list[Path]:
        """Every trace the folder holds: the picks first, then the others newest first."""
        picked = [f for _, f in self.picks]
        rest = sorted((c for run in self.runs for c in run.files if c.path not in picked),
                      key=_newest_first)
        return picked + [c.path for c in rest]

    @property
    def all_skipped(self) -> list[Skipped]:
        """Every file not analysed, with its reason."""
        out = list(self.skipped)
        if self.every:
            return out
        for k, run in enumerate(self.runs):
            if k == self.chosen:
                out += run.older
                if run.kind == "traces":
                    out += [Skipped(c.path, f"older than {run.files[0].path.name} in the same "
                                    f"folder ({c.time_source} time {_when(c.time)})")
                            for c in run.files[1:]]
            else:
                why = (f"in run {k + 1} ({run.name}), not the one picked; "
                       f"choose it with --run {k + 1}")
                out += [Skipped(c.path, why) for c in run.files] + run.older
        return out

    def why(self) -> str:
        """One sentence: what was picked and why."""
        if self.every:
            return (f"--all: every trace in the folder ({units.plural(len(self.picks), 'file')}), "
                    "each analysed on its own")
        chosen = self.chosen
        assert chosen is not None  # without every=True a run is always chosen
        run = self.runs[chosen]
        order = "newest run" if chosen == 0 else "run chosen with --run"
        if run.kind == "job":
            return (f"run {chosen + 1} ({run.name}): {run.describe()}; the {order}; ranks "
                    "grouped by folder, distributedInfo and time (each rank's newest trace)")
        src = run.files[0].time_source
        stamp = {"name": "Kineto's timestamp in the file name", "trace": "the trace's own clock",
                 "mtime": "the file's modification time"}[src]
        return (f"run {chosen + 1} ({run.name}): the newest trace by {stamp}, "
                f"{_when(run.files[0].time)}; the {order}")

    def lines(self) -> list[str]:
        """What the CLI prints about the folder: pick, other runs, skipped files by reason."""
        out = [f"Folder {self.root}: {self.why()}"]
        if self.truncated:
            out.append(f"  scan stopped after {MAX_FILES:,} files")
        if len(self.runs) > 1 and not self.every:
            out.append(f"  {units.plural(len(self.runs), 'run')} in this folder (choose one with "
                       "--run N or --run FOLDER, or --all for every trace):")
            for k, run in enumerate(self.runs):
                mark = "*" if k == self.chosen else " "
                names = _names([self._rel(c.path) for c in run.files], 3)
                out.append(f"   {mark}{k + 1}. {run.name}: {run.describe()}: {names}")
        by_reason: dict[str, list[str]] = {}
        for s in self.all_skipped:
            if not s.reason.startswith("in run "):  # those are listed with their run above
                by_reason.setdefault(s.reason, []).append(self._rel(s.path))
        for reason, paths in by_reason.items():
            out.append(f"  skipped {units.plural(len(paths), 'file')} ({reason}): "
                       f"{_names(paths, 8)}")
        return out

    def _rel(self, p: Path) -> str:
        try:
            return str(p.relative_to(self.root))
        except ValueError:
            return str(p)

    def to_json(self) -> dict:
        return {
            "root": str(self.root), "why": self.why(), "every": self.every,
            "chosen_run": None if self.chosen is None else self.chosen + 1,
            "runs": [{"number": k + 1, "name": r.name, "kind": r.kind, "folder": r.folder,
                      "world_size": r.world_size, "time": r.time,
                      "files": [c.to_json() for c in r.files]} for k, r in enumerate(self.runs)],
            "picked": [{"label": label, "path": str(p)} for label, p in self.picks],
            "skipped": [s.to_json() for s in self.all_skipped],
        }


# ----------------------------------------------------------------------------- planning

def plan_folder(path: str | os.PathLike, run: str | None = None,
                every: bool = False) -> FolderPlan:
    """Scan a folder and decide (rules in the module docstring). Raises NoTraceInFolder when
    it holds no trace, naming what it holds (a session: why its run wrote none); TraceError
    when `run` names no run."""
    root = Path(path)
    try:
        return _plan(root, run, every)
    except NoTraceInFolder:
        reason = no_trace_reason(root)
        if reason:  # "<session>: <why>": the script's exception, no finished record...
            why = reason.removeprefix(f"{root}: ")
            raise NoTraceInFolder(f"{root}: folder holds no trace: {why}") from None
        raise


def _plan(root: Path, run: str | None, every: bool) -> FolderPlan:
    files, truncated = _scan(root)
    if not files:
        try:  # the scan skips what it cannot list: say so rather than "empty"
            os.listdir(root)
        except OSError as exc:
            raise NoTraceInFolder(f"{root}: cannot read this folder "
                                  f"({exc.strerror or exc})") from None
        raise NoTraceInFolder(f"{root}: folder is empty")
    candidates: list[Candidate] = []
    skipped: list[Skipped] = []
    session = _session_files(root)
    for f in files:
        c = Skipped(f, SESSION_FILE) if session(f) else _candidate(root, f)
        if isinstance(c, Candidate):
            candidates.append(c)
        else:
            skipped.append(c)
    if not candidates:
        raise NoTraceInFolder(f"{root}: folder holds no trace (*.pt.trace.json, *.json.gz): "
                         + _skip_summary(skipped))
    runs = _runs(candidates)
    plan = FolderPlan(root=root, runs=runs, chosen=None if every else 0, skipped=skipped,
                      every=every, truncated=truncated)
    if run is not None and not every:
        plan.chosen = _choose(plan, run)
    return plan


SESSION_FILE = "the session's own record, not a trace"


def _session_files(root: Path) -> Callable[[Path], bool]:
    """For a session folder (run.json or events*.jsonl at its top): whether a file is one of
    the runner's records (run.json, events*.jsonl, stdout.log, lineprof/, tune.json)."""
    if not is_session(root):
        return lambda f: False
    top = {layout.RUN_JSON, layout.STDOUT_LOG, layout.TUNE_JSON}

    def is_record(f: Path) -> bool:
        rel = f.relative_to(root).parts
        return ((len(rel) == 1 and (rel[0] in top or fnmatch.fnmatch(rel[0], layout.EVENT_GLOB)))
                or rel[0] == layout.LINEPROF)

    return is_record


def _skip_summary(skipped: list[Skipped]) -> str:
    shown = "; ".join(f"{s.path.name} ({s.reason})" for s in skipped[:4])
    return shown + (f"; and {len(skipped) - 4} more" if len(skipped) > 4 else "")


def _choose(plan: FolderPlan, run: str) -> int:
    listed = ", ".join(f"{k + 1} = {r.name}" for k, r in enumerate(plan.runs))
    if run.isdigit() and 1 <= int(run) <= len(plan.runs):
        return int(run) - 1
    named = [k for k, r in enumerate(plan.runs) if run in (r.name, r.folder)]
    if len(named) == 1:
        return named[0]
    why = "names several runs" if named else "is no run"
    raise TraceError(f"{plan.root}: --run {run} {why} in this folder (runs: {listed})")


def _scan(root: Path) -> tuple[list[Path], bool]:
    """Every file below root in a stable order (hidden folders are not entered)."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            out.append(Path(dirpath) / name)
            if len(out) >= MAX_FILES:
                return out, True
    return out, False


def _candidate(root: Path, f: Path) -> Candidate | Skipped:
    name = f.name
    lower = name.lower()
    if name.startswith("."):
        return Skipped(f, "hidden or temporary file")
    if not (lower.endswith(".json") or lower.endswith(".json.gz")):
        return Skipped(f, "not a trace file by name (*.json, *.json.gz)")
    try:
        st = os.stat(f)
    except OSError as exc:
        return Skipped(f, f"cannot read: {exc.strerror or exc}")
    if not stat.S_ISREG(st.st_mode):
        return Skipped(f, f"is {kind_of(st.st_mode)}, not a trace file")
    if st.st_size == 0:
        return Skipped(f, "file is empty")
    head = read_head(f)
    if isinstance(head, str):
        return Skipped(f, head)
    data, whole = head
    if not looks_like_trace(data, whole):
        return Skipped(f, "JSON without a traceEvents list: not a trace")
    rank, world, job = distributed_info(data)
    if rank is None:
        rank = rank_in_name(name)
    when, source = file_time(f, st.st_mtime, data)
    folder = f.parent.relative_to(root).as_posix() if f.parent != root else "."
    return Candidate(f, folder, rank, world, when, source, job)


def _runs(candidates: list[Candidate]) -> list[Run]:
    by_folder: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_folder.setdefault(c.folder, []).append(c)
    runs: list[Run] = []
    for folder, files in by_folder.items():
        ranked = [c for c in files if c.rank is not None]
        single = sorted((c for c in files if c.rank is None), key=_newest_first)
        if single:
            runs.append(Run(folder, "traces", single))
        by_job: dict[tuple, list[Candidate]] = {}
        for c in ranked:
            by_job.setdefault(c.job, []).append(c)
        for group in by_job.values():
            for job in _split_by_time(group):
                runs.append(_job(folder, group[0].world_size, job))
    runs.sort(key=lambda r: (-r.time, r.folder, r.kind))
    _name(runs)
    return runs


def _newest_first(c: Candidate) -> tuple:
    return (-c.time, c.path.name)


def _split_by_time(group: list[Candidate]) -> list[list[Candidate]]:
    group = sorted(group, key=lambda c: (c.time, c.path.name))
    jobs, current = [], [group[0]]
    for prev, c in zip(group, group[1:], strict=False):
        if c.time - prev.time > JOB_GAP_S:
            jobs.append(current)
            current = []
        current.append(c)
    jobs.append(current)
    return jobs


def _job(folder: str, world: int | None, files: list[Candidate]) -> Run:
    """One job's traces (each with a rank, as _runs passes them): each rank's newest."""
    newest: dict[int, Candidate] = {}
    older: list[Skipped] = []
    for c in sorted(files, key=_newest_first):
        if c.rank is None:
            continue
        if c.rank in newest:
            older.append(Skipped(c.path, f"rank {c.rank} again in this job: older than "
                                         f"{newest[c.rank].path.name}"))
        else:
            newest[c.rank] = c
    out_of_range = [(rank, c) for rank, c in newest.items() if world is not None and rank >= world]
    for rank, c in out_of_range:  # distributedInfo says the rank cannot exist in this world
        del newest[rank]
        older.append(Skipped(c.path, f"rank {rank} is outside world size {world}"))
    picked = [c for _, c in sorted(newest.items())]
    if not picked:  # only impossible ranks: keep them as single traces
        return Run(folder, "traces", sorted((c for _, c in out_of_range), key=_newest_first))
    return Run(folder, "job", picked, older, world)


def _name(runs: list[Run]) -> None:
    """A run's name is its folder ("." is the opened one); a folder holding several runs numbers
    them, newest first: "logs #1", "logs #2"."""
    total: dict[str, int] = {}
    for r in runs:
        total[r.folder] = total.get(r.folder, 0) + 1
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.folder] = seen.get(r.folder, 0) + 1
        r.name = r.folder if total[r.folder] == 1 else f"{r.folder} #{seen[r.folder]}"


def _names(names: list[str], most: int) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most
                                      else "")


def _label(c: Candidate, n: int) -> str:
    if n == 1:
        return ""
    return f"rank {c.rank}" if c.rank is not None else c.path.name


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
