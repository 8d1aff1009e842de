"""One tune trial: the script under the runner with `--set`s, watched while it runs (memory,
budget, cancel, Ctrl-C, its workers' CPU time), then measured from its session folder.

A trial runs the script without recording (the profiler's window is set past any step: its
start-up alone took 2-8 s on a loaded 2-core machine); only a trial that must leave a trace
for the compare view (`Trial.profiled`: the noise check's repeats, see core/tune/job.py)
records a short window at its start, and runs on past it (`--no-stop-after-window`). The tune
follows its step events and stops it once the steady window (core/session/steady.py: after
the queued batches drained, >= 20 steps over >= 2 s) is measured on unprofiled steps, or the
script ends by itself. Under torchrun
(`nproc_per_node` > 1) every rank must reach it, and the slowest rank is the trial's figure.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path

import numpy as np
import psutil

from stallscope.core.capture.exits import STOPPED_REASON
from stallscope.core.capture.overrides import DEFAULTS, KEYS, format_value
from stallscope.core.errors import Cancelled, StallscopeError
from stallscope.core.jobs import CancelFlag
from stallscope.core.launch import Job, RunHandle, Where, start
from stallscope.core.session.events import DataLoaderBuilt, Event, StepColumns, StepEvent
from stallscope.core.session.reader import open_session
from stallscope.core.session.steady import (
    busiest_loader,  # the DataLoader the steps drew from
    queued_batches,
)
from stallscope.core.tune.cpu import WorkerCpu, busy, tree
from stallscope.core.tune.memory import GUARD, TreeMemory

POLL_S = 0.1
SAMPLE_S = 0.25
FOLLOW_S = 0.25
TAIL_BYTES = 4000  # of the script's output: a crashed trial's last line is its message
UNPROFILED = {"wait": 10**9, "warmup": 0, "active": 1, "repeat": 1}  # never records
OK, CRASHED, OUT_OF_MEMORY, OVER_BUDGET = "ok", "crashed", "out of memory", "over budget"
SKIPPED, INTERRUPTED, NO_STEPS = "skipped", "interrupted", "no steps"
MEASURED = "measured"          # the steady window was measured: the tune stopped the script
MEASURED_REASON = "stopped by stallscope tune: steady steps measured"


def settings_text(values: dict) -> str:
    return ", ".join(f"{k}={format_value(v)}" for k, v in values.items() if v is not None)


@dataclass
class Trial:
    index: int
    name: str                       # its session folder's name inside the tune folder
    settings: dict                  # the four settings the trial asks for
    changes: dict                   # those that differ from the script as written
    session: str = ""
    status: str = "pending"
    message: str = ""
    step_ms: float | None = None     # steady: elapsed over the steady steps / their count
    data_wait_ms: float | None = None  # summed data wait over them / their count
    data_wait_share: float | None = None  # summed data wait / elapsed
    utilization: float | None = None  # mean over GPUs (None without one)
    steps: int = 0
    steady_steps: int = 0            # steps in the steady window (the slowest rank's)
    steady_s: float | None = None
    steady_reached: bool = False     # False: the script ended before steady state
    rank: int | None = None          # under torchrun: the slowest rank, whose figures these are
    worker_cpu: float | None = None  # workers' CPU time / their wall time less run-queue waits
    others: float | None = None      # share of the machine's CPU other processes used (cpu.py)
    steal: float | None = None       # share of the trial's CPU want spent in a run queue
    profiled: bool = False           # records a short window at its start (a trace)
    peak_rss: int | None = None      # the process tree's resident memory, peak
    peak_private: int | None = None  # its private memory, peak
    main_private: int | None = None
    worker_private: int | None = None  # the largest one worker used
    wall_s: float | None = None
    effective: dict = field(default_factory=dict)  # what the DataLoader really got
    epoch_steps: float | None = None  # steps between its loader's epoch starts (two seen)
    batching: float | None = None  # its steps an epoch over the script as written's, when
    #                                they differ: step_ms and data_wait_ms were scaled by it

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def busy(self) -> bool:
        """Other work took the CPU from this trial (core/tune/cpu.py)."""
        return busy(self.others, self.steal)

    @property
    def label(self) -> str:
        return settings_text(self.changes) if self.changes else "as written"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Trial:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class Launch:
    """What every trial of a tune shares."""

    script: Path
    args: list[str]
    cwd: Path
    python: str
    schedule: dict                   # the profiled trials' window
    env: dict = field(default_factory=dict)
    site: str | None = None  # "file:line" of the tuned DataLoader (None: every DataLoader)
    nproc_per_node: int = 1  # > 1: every trial under torchrun, this many ranks
    where: Where | None = None  # a remote host (core/launch); None: this machine

    @property
    def place(self) -> Where:
        return self.where or Where(python=self.python, cwd=str(self.cwd))

    def sets(self, changes: dict) -> list[str]:
        scope = f"{self.site}:" if self.site else ""
        return [f"{scope}{k}={format_value(v)}" for k, v in changes.items() if v is not None]

    def job(self, session: Path, changes: dict, profiled: bool = False) -> Job:
        options = {"sets": self.sets(changes), "profile_memory": False,
                   "stop_after_window": False, "nproc_per_node": self.nproc_per_node}
        return Job(script=str(self.script), args=list(self.args), options=options,
                   schedule=self.schedule if profiled else UNPROFILED, env=dict(self.env),
                   session=session)

    def command(self, session: Path, changes: dict, profiled: bool = False) -> list[str]:
        """The runner's command line for a local trial (tests/bench run it by hand)."""
        from stallscope.core.launch.local import runner_command

        return runner_command(self.python, self.job(session, changes, profiled))


def changes_from(script: dict, settings: dict) -> dict:
    return {k: settings.get(k) for k in KEYS
            if settings.get(k) != script.get(k, DEFAULTS[k])
            and not (k == "prefetch_factor" and settings.get(k) is None)}


def run_trial(launch: Launch, trial: Trial, tune_dir: Path, deadline: float, limit: int,
               cancel: CancelFlag | None = None) -> Trial:
    """Run one trial to its end (or stop it); fills in `trial` and returns it. Raises
    Cancelled / KeyboardInterrupt after stopping the trial and closing its session.

    On a remote host (launch.where) the trial's memory and its workers' CPU time are not
    sampled (they are the host's): the memory guard and the workers' CPU share stay off."""
    session = tune_dir / trial.name
    trial.session = str(session)
    memory, cpu = TreeMemory(), WorkerCpu()
    tail = bytearray()

    def keep(data: bytes, _is_err: bool) -> None:
        tail.extend(data)
        del tail[:-TAIL_BYTES]

    t0 = time.monotonic()
    try:
        run = start(launch.place, launch.job(session, trial.changes, trial.profiled), keep)
    except StallscopeError as exc:
        trial.status, trial.message = CRASHED, str(exc)
        return trial
    try:
        stop_reason = _watch(run, memory, cpu, deadline, limit, cancel, launch.nproc_per_node)
    except BaseException:  # Ctrl-C, or the GUI job closed: no runner is left behind
        _stop(run, "interrupted by stallscope tune")
        trial.status, trial.message = INTERRUPTED, "stopped before its end"
        _fill_memory(trial, memory)
        raise
    finally:
        trial.wall_s = round(time.monotonic() - t0, 2)
    if stop_reason == OUT_OF_MEMORY:
        _stop(run, "stopped by stallscope tune: out of memory", hard=True)
        trial.status = OUT_OF_MEMORY
        trial.message = (f"its processes used {memory.private / 2**20:,.0f} MiB of private "
                         f"memory, near the {limit / 2**20:,.0f} MiB limit: stopped")
    elif stop_reason == OVER_BUDGET:
        _stop(run, "stopped by stallscope tune: over the time budget")
        trial.status, trial.message = OVER_BUDGET, "the time budget ran out during it"
    elif stop_reason == MEASURED:
        _stop(run, MEASURED_REASON)
    elif stop_reason == "cancelled":
        _stop(run, "cancelled in stallscope tune")
        trial.status, trial.message = INTERRUPTED, "cancelled"
        _fill_memory(trial, memory)
        raise Cancelled("cancelled")
    _fill_memory(trial, memory)
    if trial.status == "pending":
        measure(trial, session, bytes(tail).decode("utf-8", errors="replace"),
                stopped=stop_reason == MEASURED, cpu=cpu if run.local_pid else None,
                site=launch.site or "")
    return trial


class StepFollower:
    """A running trial's step events, per rank, and whether every rank has its steady window
    (the one statistic and the one queued-batches rule, core/session/steady.py)."""

    def __init__(self, ranks: int) -> None:
        self.steps: dict[int | None, StepColumns] = {}
        self.loaders: list[dict] = []
        self.ranks = ranks

    def measured(self, new: list[Event]) -> bool:
        for e in new:
            if isinstance(e, DataLoaderBuilt) and e.rank in (0, None):
                self.loaders.append({"effective": e.effective})
            elif isinstance(e, StepEvent):
                self.steps.setdefault(e.rank, StepColumns()).add(e)
        if not any(isinstance(e, StepEvent) for e in new) or len(self.steps) < self.ranks:
            return False
        queued = queued_batches(self.loaders)
        for columns in self.steps.values():
            w = columns.steady(queued)
            if w is None or not w.reached:
                return False
        return True


def _watch(run: RunHandle, memory: TreeMemory, cpu: WorkerCpu, deadline: float, limit: int,
           cancel: CancelFlag | None, ranks: int = 1) -> str:
    """Follow the run; '' when it ended by itself, else why it must be stopped."""
    root = None
    if run.local_pid is not None:
        try:
            root = psutil.Process(run.local_pid)
        except psutil.Error:
            root = None
    follower = StepFollower(ranks)
    next_sample = next_follow = 0.0
    new: list[Event] = []
    while True:
        new += run.poll()
        if not run.running:
            return ""
        now = time.monotonic()
        if cancel is not None and cancel.is_set():
            return "cancelled"
        if now > deadline:
            return OVER_BUDGET
        if root is not None and now >= next_sample:
            next_sample = now + SAMPLE_S
            procs = tree(root)
            cpu.sample(procs, time.time())
            if memory.add(procs) > GUARD * limit:
                return OUT_OF_MEMORY
        if now >= next_follow:
            next_follow = now + FOLLOW_S
            if follower.measured(new):
                return MEASURED
            new = []
        time.sleep(POLL_S)


def _stop(run: RunHandle, reason: str, hard: bool = False) -> None:
    """The launcher's one stop rule (SIGTERM, then SIGKILL to the group; `hard`: SIGKILL now),
    waited for; the session is closed with `reason` when the runner could not close it."""
    run.stop(reason, grace=0 if hard else None)
    run.wait()


def _fill_memory(trial: Trial, memory: TreeMemory) -> None:
    if memory.rss:
        trial.peak_rss, trial.peak_private = memory.rss, memory.private
        trial.main_private = memory.main
        trial.worker_private = memory.per_worker if memory.workers else None


def measure(trial: Trial, session: Path, tail: str = "", stopped: bool = False,
            cpu: WorkerCpu | None = None, site: str = "") -> None:
    """Status and figures of a trial that ended by itself (or that the tune stopped once its
    steady window was measured), read from its session folder. `site`: the tuned DataLoader
    (its epochs; default the busiest)."""
    try:
        s = open_session(session)
    except Exception:  # noqa: BLE001 - no session at all: the runner did not start
        trial.status = CRASHED
        trial.message = _last_line(tail) or "the runner wrote no session"
        return
    end = s.end
    steps = s.steps()
    trial.steps = len(steps)
    loaders = s.loaders()
    if loaders:
        busiest = busiest_loader(loaders)
        trial.effective = busiest.get("effective", {})
        site = site or str(busiest.get("site") or "")
    trial.epoch_steps = epoch_length([e for e in s.events if e.get("event") == "epoch"
                                      and str(e.get("site", "")) == site])
    ended_well = end is not None and (
        (end.rc == 0 and end.reason in (STOPPED_REASON, "completed"))
        or (stopped and end.exception is None))
    if not ended_well:
        trial.status = CRASHED
        if end is not None and end.exception is not None:
            trial.message = end.exception.text + (f" (at step {end.exception.step})"
                                                  if end.exception.step is not None else "")
        else:
            trial.message = (end.reason if end is not None else "") or _last_line(tail)
        return
    found = s.steady()  # under torchrun: the slowest rank (core/session/steady.slowest)
    assert end is not None  # ended_well needs an end
    if found is None:
        trial.status, trial.message = NO_STEPS, end.warning or "no steps were measured"
        return
    rank, w = found
    trial.status = OK
    trial.step_ms, trial.data_wait_ms = w.step_ms, w.data_wait_ms
    trial.data_wait_share = w.data_wait_share
    trial.steady_steps, trial.steady_s, trial.steady_reached = w.steps, w.seconds, w.reached
    trial.rank = rank if len(s.ranks) > 1 else None
    trial.message = w.note
    if cpu is not None:
        if int(trial.effective.get("num_workers") or 0) > 0:
            trial.worker_cpu = cpu.share(w.t0, w.t1)
        trial.others, trial.steal = cpu.contention(w.t0, w.t1)
    if s.run.get("cuda_available"):
        trial.utilization = _utilization(s.traces())


def epoch_length(epochs: list[dict]) -> float | None:
    """Steps from one epoch start to the next (the median; the events' `n`, the steps done
    when the epoch's first batch came), None without two starts apart. Not the trial's steps
    over its epoch starts: a last epoch that `max_steps` cut short read 40-step epochs as 30
    (hunt item 8: 90 steps, 3 starts)."""
    starts = sorted(int(e["n"]) for e in epochs if isinstance(e.get("n"), int))
    gaps = [b - a for a, b in pairwise(starts) if b > a]  # ranks' equal starts: no gap
    return float(statistics.median(gaps)) if gaps else None


def _utilization(traces: list[Path]) -> float | None:
    if not traces:
        return None
    try:
        from stallscope.core.document import analyze_path

        report = analyze_path(traces[-1])
        values = [d.utilization for d in report.devices.values()]
    except Exception:  # noqa: BLE001 - a figure we cannot read stays empty
        return None
    return float(np.mean(values)) if values else None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
