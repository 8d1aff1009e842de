"""One tune trial: the script under the runner with `--set`s, watched while it runs (memory,
budget, cancel, Ctrl-C), then measured from its session folder."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import psutil

from stallscope.core.capture import options as runner_options
from stallscope.core.capture.exits import STOPPED_REASON
from stallscope.core.capture.overrides import DEFAULTS, KEYS, format_value
from stallscope.core.errors import Cancelled
from stallscope.core.jobs import CancelFlag
from stallscope.core.session.reader import open_session, write_finished
from stallscope.core.tune.memory import GUARD, TreeMemory

RUNNER = Path(runner_options.__file__).resolve().with_name("runner.py")
POLL_S = 0.1
SAMPLE_S = 0.25
STOP_GRACE_S = 5.0
OK, CRASHED, OUT_OF_MEMORY, OVER_BUDGET = "ok", "crashed", "out of memory", "over budget"
SKIPPED, INTERRUPTED, NO_STEPS = "skipped", "interrupted", "no steps"


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
    step_ms: float | None = None     # median steady-state step time
    data_wait_ms: float | None = None
    data_wait_share: float | None = None
    utilization: float | None = None  # mean over GPUs (None without one)
    steps: int = 0
    peak_rss: int | None = None      # the process tree's resident memory, peak
    peak_private: int | None = None  # its private memory, peak
    main_private: int | None = None
    worker_private: int | None = None  # the largest one worker used
    wall_s: float | None = None
    effective: dict = field(default_factory=dict)  # what the DataLoader really got

    @property
    def ok(self) -> bool:
        return self.status == OK

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
    schedule: dict
    env: dict = field(default_factory=dict)
    site: str | None = None  # "file:line" of the tuned DataLoader (None: every DataLoader)

    def sets(self, changes: dict) -> list[str]:
        scope = f"{self.site}:" if self.site else ""
        return [f"{scope}{k}={format_value(v)}" for k, v in changes.items() if v is not None]

    def command(self, session: Path, changes: dict) -> list[str]:
        options = {"sets": self.sets(changes), "profile_memory": False,
                   "stop_after_window": True}
        argv = runner_options.build_argv(session, str(self.script), self.args, self.schedule,
                                         options)
        return [self.python, str(RUNNER), *argv]


def changes_from(script: dict, settings: dict) -> dict:
    return {k: settings.get(k) for k in KEYS
            if settings.get(k) != script.get(k, DEFAULTS[k])
            and not (k == "prefetch_factor" and settings.get(k) is None)}


def run_trial(launch: Launch, trial: Trial, tune_dir: Path, deadline: float, limit: int,
              cancel: CancelFlag | None = None) -> Trial:
    """Run one trial to its end (or stop it); fills in `trial` and returns it. Raises
    Cancelled / KeyboardInterrupt after stopping the trial and closing its session."""
    session = tune_dir / trial.name
    trial.session = str(session)
    env = {**os.environ, **launch.env, "PYTHONUNBUFFERED": "1"}
    env.pop("QT_QPA_PLATFORM", None)
    memory = TreeMemory()
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(launch.command(session, trial.changes), cwd=launch.cwd,
                                    env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            trial.status, trial.message = CRASHED, (f"cannot start {launch.python}: "
                                                    f"{exc.strerror or exc}")
            return trial
        stop_reason = ""
        try:
            stop_reason = _watch(proc, memory, deadline, limit, cancel)
        except BaseException:  # Ctrl-C, or the GUI job closed: no runner is left behind
            _stop(proc, session, "interrupted by stallscope tune")
            trial.status, trial.message = INTERRUPTED, "stopped before its end"
            _fill_memory(trial, memory)
            raise
        finally:
            trial.wall_s = round(time.monotonic() - t0, 2)
        if stop_reason == OUT_OF_MEMORY:
            _stop(proc, session, "stopped by stallscope tune: out of memory", hard=True)
            trial.status = OUT_OF_MEMORY
            trial.message = (f"its processes used {memory.private / 2**20:,.0f} MiB of private "
                             f"memory, near the {limit / 2**20:,.0f} MiB limit: stopped")
        elif stop_reason == OVER_BUDGET:
            _stop(proc, session, "stopped by stallscope tune: over the time budget")
            trial.status, trial.message = OVER_BUDGET, "the time budget ran out during it"
        elif stop_reason == "cancelled":
            _stop(proc, session, "cancelled in stallscope tune")
            trial.status, trial.message = INTERRUPTED, "cancelled"
            _fill_memory(trial, memory)
            raise Cancelled("cancelled")
        rc = proc.returncode
        if rc is not None and rc < 0:
            write_finished(session, rc, f"killed by {signal.Signals(-rc).name}")
        out.seek(0)
        tail = out.read()[-4000:].decode("utf-8", errors="replace")
    _fill_memory(trial, memory)
    if trial.status == "pending":
        measure(trial, session, launch.schedule["wait"], tail)
    return trial


def _watch(proc: subprocess.Popen, memory: TreeMemory, deadline: float, limit: int,
           cancel: CancelFlag | None) -> str:
    """Wait for the runner; '' when it ended by itself, else why it must be stopped."""
    try:
        root = psutil.Process(proc.pid)
    except psutil.Error:
        root = None
    next_sample = 0.0
    while proc.poll() is None:
        now = time.monotonic()
        if cancel is not None and cancel.is_set():
            return "cancelled"
        if now > deadline:
            return OVER_BUDGET
        if root is not None and now >= next_sample:
            next_sample = now + SAMPLE_S
            if memory.sample(root) > GUARD * limit:
                return OUT_OF_MEMORY
        time.sleep(POLL_S)
    return ""


def _stop(proc: subprocess.Popen, session: Path, reason: str, hard: bool = False) -> None:
    """SIGTERM to the runner (it writes what it has and `finished`), then SIGKILL to its
    process group; the session is closed when the runner could not close it."""
    if proc.poll() is None and not hard:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(STOP_GRACE_S)
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # workers too (the runner leads its session)
    except OSError:
        pass
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    try:
        write_finished(session, proc.returncode, reason)
    except OSError:
        pass


def _fill_memory(trial: Trial, memory: TreeMemory) -> None:
    if memory.rss:
        trial.peak_rss, trial.peak_private = memory.rss, memory.private
        trial.main_private = memory.main
        trial.worker_private = memory.per_worker if memory.workers else None


def measure(trial: Trial, session: Path, skip: int, tail: str = "") -> None:
    """Status and figures of a trial that ended by itself, read from its session folder."""
    try:
        s = open_session(session)
    except Exception:  # noqa: BLE001 - no session at all: the runner did not start
        trial.status = CRASHED
        trial.message = _last_line(tail) or "the runner wrote no session"
        return
    end = s.end
    steps = s.steps()
    trial.steps = len(steps)
    if s.run.get("dataloaders"):
        trial.effective = _tuned_loader(s.run["dataloaders"]).get("effective", {})
    if end is None or not (end.rc == 0 and end.reason in (STOPPED_REASON, "completed")):
        trial.status = CRASHED
        if end is not None and end.exception is not None:
            trial.message = end.exception.text + (f" (at step {end.exception.step})"
                                                  if end.exception.step is not None else "")
        else:
            trial.message = (end.reason if end is not None else "") or _last_line(tail)
        return
    steady = steps.n >= skip
    if steady.sum() < 2:
        steady = steps.n >= 1
    if not steady.any():
        trial.status, trial.message = NO_STEPS, end.warning or "no steps were measured"
        return
    wall, wait = steps.wall_ms[steady], steps.data_wait_ms[steady]
    trial.status = OK
    trial.step_ms = float(np.nanmedian(wall))
    trial.data_wait_ms = float(np.nanmedian(wait))
    total = float(np.nansum(wall))
    trial.data_wait_share = float(np.nansum(wait)) / total if total > 0 else 0.0
    if int(steady.sum()) < 3:
        trial.message = f"only {int(steady.sum())} steady steps: the script ended early"
    if s.run.get("cuda_available"):
        trial.utilization = _utilization(s.traces())


def _tuned_loader(loaders: list[dict]) -> dict:
    """The DataLoader the steps drew from: the one that served the most batches."""
    return max(loaders, key=lambda d: (int(d.get("batches") or 0), -loaders.index(d)))


def _utilization(traces: list[Path]) -> float | None:
    if not traces:
        return None
    try:
        from stallscope.core.analysis import analyze
        from stallscope.core.trace import load

        report = analyze(load(traces[-1]))
        values = [d.utilization for d in report.devices.values()]
    except Exception:  # noqa: BLE001 - a figure we cannot read stays empty
        return None
    return float(np.mean(values)) if values else None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
