"""Read a session folder written by the runner: run.json, events, traces, stdout.

Replay reads every events*.jsonl at once; `EventFollower` reads what was appended since the last
poll and never hands out a line that is not yet complete (the runner may be mid-write).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from stallscope.core.capture import layout
from stallscope.core.capture.layout import (
    EVENT_GLOB,
    EVENTS,
    RUN_JSON,
    STDOUT_LOG,
    TRACE_SUFFIX,
    TRACES,
)
from stallscope.core.errors import StallscopeError
from stallscope.core.session.events import Event, Finished, typed
from stallscope.core.session.steady import (
    Steady,
    queued_batches,
    slowest,
    steady,
    training_epochs,
)
from stallscope.core.session.whole_run import session_steady
from stallscope.core.untrusted import CAPS, count, json_lines, read_bytes, read_json

STEP_FIELDS = ("n", "t", "wall_ms", "data_wait_ms", "batches", "rss", "cuda_allocated",
               "cuda_reserved", "span_steps", "span_data_wait_ms")


def is_session(path: str | os.PathLike) -> bool:
    """A folder holding run.json or an events file; False for one that cannot be read (no
    permission: the folder's scan then says so in one line, core/folder.py)."""
    p = Path(path)
    try:
        return p.is_dir() and ((p / RUN_JSON).is_file() or any(_events_files(p)))
    except OSError:
        return False


def _events_files(p: Path) -> list[Path]:
    """The folder's events*.jsonl; glob hides a folder it cannot list, so list it first."""
    os.listdir(p)
    return sorted(p.glob(EVENT_GLOB))


def rank_of_file(path: Path) -> int | None:
    """events.rank3.jsonl -> 3; events.jsonl -> None."""
    return layout.rank_of_file(path.name)


def parse_lines(data: bytes, source_rank: int | None) -> tuple[list[dict], int]:
    """Complete JSON lines to events; returns (events, lines that were not JSON objects).
    Numbers no float can hold (10**400, NaN) are read as None (core/untrusted.json_lines)."""
    records, bad = json_lines(data)
    events = []
    for record in records:
        if not isinstance(record, dict) or "event" not in record:
            bad += 1
            continue
        if source_rank is not None:
            record.setdefault("rank", source_rank)
        events.append(record)
    return events, bad


def read_events(path: str | os.PathLike) -> list[dict]:
    """All events of one events file. A torn last line (a runner killed mid-write) is skipped."""
    p = Path(path)
    events, _ = parse_lines(read_bytes(p, "events"), rank_of_file(p))
    return events


class EventFollower:
    """Incremental reader of a session's events*.jsonl files (new rank files are picked up)."""

    def __init__(self, session: str | os.PathLike) -> None:
        self.path = Path(session)
        self._offsets: dict[Path, int] = {}
        self._tails: dict[Path, bytes] = {}
        self.bad_lines = 0

    def poll_typed(self) -> list[Event]:
        """What `poll` returns, as typed events (core/session/events.py)."""
        return [typed(e) for e in self.poll()]

    def poll(self) -> list[dict]:
        out: list[dict] = []
        try:
            files = _events_files(self.path)
        except OSError:
            return out
        for p in files:
            out.extend(self._read_new(p))
        out.sort(key=lambda e: e.get("t", 0.0))
        return out

    def _read_new(self, p: Path) -> list[dict]:
        offset = self._offsets.get(p, 0)
        try:
            size = p.stat().st_size
            if size < offset:  # rewritten from scratch: start over
                offset, self._tails[p] = 0, b""
            if size == offset or size - offset > CAPS["events"]:
                return []
            with open(p, "rb") as f:
                f.seek(offset)
                data = f.read(size - offset)
        except OSError:
            return []
        self._offsets[p] = offset + len(data)
        data = self._tails.get(p, b"") + data
        cut = data.rfind(b"\n") + 1
        self._tails[p] = data[cut:]
        events, bad = parse_lines(data[:cut], rank_of_file(p))
        self.bad_lines += bad
        return events


@dataclass
class Steps:
    """Per-step figures of one rank as numpy columns (NaN where a figure was not recorded)."""

    n: np.ndarray
    t: np.ndarray             # event time (s since the epoch) at the step's end
    wall_ms: np.ndarray
    data_wait_ms: np.ndarray
    batches: np.ndarray       # batches fetched in the step
    rss: np.ndarray
    cuda_allocated: np.ndarray
    cuda_reserved: np.ndarray
    span_steps: np.ndarray         # a thinned step line: the steps it stands for (NaN: itself)
    span_data_wait_ms: np.ndarray  # ... and their summed data wait
    phase: list[str] = field(default_factory=list)

    @classmethod
    def from_events(cls, events: list[dict], rank: int | None = None) -> Steps:
        rows = [e for e in events if e.get("event") == "step"
                and (rank is None or e.get("rank", 0) == rank)]
        cols = {k: np.array([_num(e.get(k)) for e in rows], dtype=np.float64)
                for k in STEP_FIELDS}
        return cls(**cols, phase=[str(e.get("phase", "")) for e in rows])

    def __len__(self) -> int:
        return len(self.n)

    def steady(self, queued: int = 0, epochs: Sequence[dict] = (), **limits) -> Steady | None:
        """The steady window (core/session/steady.py) of these steps."""
        return steady(self.t, self.wall_ms, self.data_wait_ms, self.batches, self.phase,
                      queued, n=self.n, epochs=epochs, span_steps=self.span_steps,
                      span_wait_ms=self.span_data_wait_ms, **limits)


def _num(value) -> float:
    return float(value) if isinstance(value, int | float) else np.nan


@dataclass
class Session:
    path: Path
    run: dict
    events: list[dict]

    @property
    def finished(self) -> dict | None:
        """The launcher's (or single process's) finished record; else the last rank's."""
        done = [e for e in self.events if e.get("event") == "finished"]
        top = [e for e in done if "rank" not in e]
        picked = top or done
        return picked[-1] if picked else None

    @property
    def end(self) -> Finished | None:
        """The finished record, typed."""
        fin = self.finished
        end = typed(fin) if fin is not None else None
        return end if isinstance(end, Finished) else None

    @property
    def ranks(self) -> list[int]:
        return sorted({e["rank"] for e in self.events if isinstance(e.get("rank"), int)})

    def steps(self, rank: int | None = None) -> Steps:
        if rank is None and self.ranks:
            rank = self.ranks[0]
        return Steps.from_events(self.events, rank)

    @property
    def line_profiled(self) -> bool:
        """Whether the run was line-profiled (`--lineprof`, run.json's options): the profiler's
        cost is then in every step time and data wait it recorded."""
        options = self.run.get("options")
        return isinstance(options, dict) and options.get("lineprof") not in (None, "", "off",
                                                                                False)

    def loaders(self) -> list[dict]:
        """The DataLoaders the script built (run.json; under torchrun the first rank's record)."""
        loaders = self.run.get("dataloaders")
        if not loaders:
            done = [e for e in self.events if e.get("event") == "finished" and "rank" in e]
            loaders = next((e["dataloaders"] for e in done if e.get("dataloaders")), None)
        if not loaders:
            end = self.end
            loaders = list(end.dataloaders) if end is not None else []
        return [d for d in loaders or [] if isinstance(d, dict)]

    def steady_by_rank(self, **limits) -> dict[int | None, Steady | None]:
        """rank -> its steady window (None for a rank without steps); one entry, rank None,
        for a run without ranks. From the record (every step) when the session has one, else
        from the step events."""
        try:
            found = session_steady(self, **limits)
        except StallscopeError:  # a damaged record: the events stand
            found = None
        if found is not None:
            return found
        loaders = self.loaders()
        queued = queued_batches(loaders)
        epochs = training_epochs([e for e in self.events if e.get("event") == "epoch"],
                                 loaders)
        out: dict[int | None, Steady | None] = {}
        ranks: list[int | None] = [*self.ranks] or [None]
        for rank in ranks:
            steps = self.steps(rank)
            mine = [e for e in epochs if e.get("rank") == rank]
            out[rank] = steps.steady(queued, epochs=mine, **limits) if len(steps) else None
        return out

    def steady(self, **limits) -> tuple[int | None, Steady] | None:
        """(rank, window) of the slowest rank (rank None without ranks); None without steps."""
        return slowest(self.steady_by_rank(**limits))

    def traces(self) -> list[Path]:
        """Announced traces that exist, in the order written, then any others in traces/."""
        seen: list[Path] = []
        for e in self.events:
            if e.get("event") == "trace_ready" and e.get("path"):
                p = resolve_path(self.path, e["path"])
                if p.is_file() and p not in seen:
                    seen.append(p)
        extra = sorted((p for p in (self.path / TRACES).glob(f"*{TRACE_SUFFIX}")
                        if p not in seen), key=lambda p: p.stat().st_mtime)
        return seen + extra

    def stdout(self, limit: int = 4 << 20) -> str:
        """The tail of stdout.log (the launcher's, or rank 0's under torchrun)."""
        for name in (STDOUT_LOG, "stdout.rank0.log"):
            p = self.path / name
            if p.is_file():
                with open(p, "rb") as f:
                    f.seek(max(0, p.stat().st_size - limit))
                    return f.read().decode("utf-8", errors="replace")
        return ""

    def summary(self) -> dict:
        """How the run ended and its steady figures (core/session/steady.py: one statistic,
        the slowest rank's under torchrun)."""
        steps = self.steps()
        fin = self.finished or {}
        counted = fin.get("steps")  # the runner's count: step events thin out in long runs
        out = {"session": str(self.path), "rc": fin.get("rc"), "reason": fin.get("reason"),
               "steps": counted if type(counted) is int and counted >= len(steps)
               else len(steps), "traces": [str(p) for p in self.traces()]}
        found = self.steady()
        if found is not None:
            rank, w = found
            out.update(step_ms=w.step_ms, data_wait_ms=w.data_wait_ms,
                       data_wait_share=w.data_wait_share, steady_steps=w.steps,
                       steady_s=w.seconds, steady_reached=w.reached)
            if w.note:
                out["steady_note"] = w.note
            if w.profiled:
                out["steady_profiled"] = w.profiled
        if self.line_profiled:
            out["lineprof"] = True
            if rank is not None and len(self.ranks) > 1:
                out["slowest_rank"] = rank
        if fin.get("warning"):
            out["warning"] = fin["warning"]
        end = self.end
        if end is not None and end.exception is not None:
            out["exception"] = {"type": end.exception.type,
                                "message": shortened(end.exception.message),
                                "step": end.exception.step}
        loaders = self.run.get("dataloaders") or (list(end.dataloaders) if end else [])
        if loaders:
            out["dataloaders"] = loaders
        return out

    def no_trace_reason(self) -> str:
        """Why this session holds no trace, in one line (for `analyze` and the app)."""
        end = self.end
        name = Path(str(self.run.get("script", ""))).name or "the script"
        log = self.path / STDOUT_LOG
        where = f"; its output is in {log}" if log.is_file() else ""
        if end is None:
            return (f"{self.path}: the run of {name} holds no trace and no finished record "
                    f"(still running, or killed){where}")
        if end.exception is not None:
            at = f" at step {end.exception.step}" if end.exception.step is not None else ""
            return (f"{self.path}: {name} raised {shortened(end.exception.text)}{at} before a "
                    f"trace was written{where}")
        if end.warning:
            return f"{self.path}: no trace: {end.warning}"
        return f"{self.path}: no trace was written ({end.reason}, exit code {end.rc}){where}"


MAX_SHOWN = 2000  # characters of an exception message from a session shown in one line


def shortened(text: str) -> str:
    """A message from a session's events as one line may show it: at most MAX_SHOWN characters
    (what the runner writes is capped already; a session from elsewhere may hold more)."""
    text = str(text)
    if len(text) <= MAX_SHOWN:
        return text
    return f"{text[:MAX_SHOWN]}… ({len(text) - MAX_SHOWN:,} more characters)"


def session_of_trace(path: str | os.PathLike) -> Path | None:
    """The session folder a trace file was written into (<session>/traces/x), else None."""
    p = Path(path)
    folder = p.parent.parent if p.parent.name == TRACES else None
    return folder if folder is not None and is_session(folder) else None


def resolve_path(session: Path, path: str) -> Path:
    """Event paths are relative to the session (it may have been copied from another machine)."""
    p = Path(path)
    if not p.is_absolute():
        return session / p
    if not p.exists() and (session / TRACES / p.name).exists():
        return session / TRACES / p.name
    return p


def open_session(path: str | os.PathLike) -> Session:
    p = Path(path)
    if not p.is_dir():
        raise StallscopeError(f"{p}: not a folder")
    if not is_session(p):
        raise StallscopeError(f"{p}: not a stallscope session (no run.json nor events.jsonl)")
    run = read_json(p / RUN_JSON, "run.json") if (p / RUN_JSON).exists() else {}
    run = run if isinstance(run, dict) else {}
    if "dataloaders" in run:
        run["dataloaders"] = checked_loaders(run["dataloaders"])
    events: list[dict] = []
    for f in _events_files(p):
        events.extend(read_events(f))
    events.sort(key=_time)
    return Session(p, run, events)


def _time(event: dict) -> float:
    t = event.get("t")
    return t if isinstance(t, float | int) and not isinstance(t, bool) else 0.0


# run.json's DataLoader settings that are counts: anything else in them is left out.
LOADER_COUNTS = ("num_workers", "prefetch_factor", "batch_size")


def checked_loaders(loaders) -> list[dict]:
    """run.json's DataLoaders as the analysis may read them: dicts only, their counts
    (num_workers, prefetch_factor, batch_size, batches) non-negative ints or left out."""
    out = []
    for d in loaders if isinstance(loaders, list) else []:
        if not isinstance(d, dict):
            continue
        d = dict(d)
        if "batches" in d and count(d["batches"]) is None:
            del d["batches"]
        for part in ("passed", "effective"):
            settings = d.get(part)
            if part in d and not isinstance(settings, dict):
                del d[part]
            elif isinstance(settings, dict):
                d[part] = {k: v for k, v in settings.items()
                           if k not in LOADER_COUNTS or v is None or count(v) is not None}
        out.append(d)
    return out


def no_trace_reason(path: str | os.PathLike) -> str | None:
    """For a session folder without a trace: why (the script's exception, no steps...); None
    when `path` is not a session or does hold a trace."""
    try:
        s = open_session(path)
    except StallscopeError:
        return None
    return None if s.traces() else s.no_trace_reason()


def has_finished(path: str | os.PathLike) -> bool:
    return layout.has_finished(Path(path) / EVENTS)


def write_finished(path: str | os.PathLike, rc: int | None, reason: str, **extra) -> bool:
    """Close a session the runner could not close itself (killed, failed to start).

    Returns False (and writes nothing) when events.jsonl already ends the run."""
    p = Path(path)
    written = layout.append_finished(p / EVENTS, rc, reason, written_by="stallscope app",
                                     **extra)
    log = p / STDOUT_LOG
    if written and not log.exists():
        log.touch()
    return written
