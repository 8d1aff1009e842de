"""Writing a session folder while the script runs: the event log and run.json."""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from . import layout, pid
from .exits import SetupError
from .options import DEFAULT_SCHEDULE

if TYPE_CHECKING:
    from .record import RunRecord

# events.jsonl holds a step line for every step of the run's first FULL_STEPS, of each profiled
# window (warm-up and active) and of the FULL_STEPS after it; otherwise at most one step line a
# SLICE_S (a line costs ~15-60 µs: a tight loop's steps must not pay it; record.bin has them all).
# A line that stands for steps left out says so: span_steps (the steps since the previous line,
# itself included), span_wall_ms and span_data_wait_ms (their sums), so sums over the lines
# still count every step.
FULL_STEPS = 1_000
SLICE_S = 0.05
# One string in an event (an exception's message, its traceback) keeps its first and last
# MAX_TEXT / 2 characters: a 42 MB message must not become a 42 MB line, nor a 42 MB print of it.
MAX_TEXT = 16 << 10


class EventLog:
    """events.jsonl: one JSON object a line, flushed per line so a follower sees it at once.

    A long run's step lines thin out to one a SLICE_S (a million-step run would otherwise write
    250 MB of them, at tens of µs a step); its whole-run record (capture/record.py) keeps every
    step."""

    def __init__(self, path: Path, rank: int | None) -> None:
        self.path = path
        self.rank = rank
        self._file = open(path, "ab")  # noqa: SIM115 - lives for the run
        self._lock = threading.Lock()
        self._pid = pid.current
        self.record: RunRecord | None = None  # every step also goes to record.bin
        self._full_until = FULL_STEPS  # every step below this number gets its line
        self._next_line = 0.0          # perf_counter time from which the next line is due
        self._span = [0, 0.0, 0.0]     # steps since the last step line, their wall, their wait
        self._last: dict | None = None  # the latest step without a line (written at close)
        self._last_t = 0.0                # ... and when it ended (time.time)

    def emit(self, event: str, **fields) -> None:
        if pid.current != self._pid or self._file.closed:
            return  # a forked DataLoader worker inherited this object: only the runner writes
        if event == layout.STEP:
            self.step(fields)
            return
        self._write(layout.encode(layout.record(event, self.rank, **capped(fields))))

    def step(self, fields: dict) -> None:
        """One step: to record.bin always, to events.jsonl as SLICE_S and FULL_STEPS say."""
        if pid.current != self._pid or self._file.closed:
            return
        if self.record is not None:
            self.record.step(fields)
        span = self._span
        wall, wait = fields.get("wall_ms"), fields.get("data_wait_ms")
        span[0] += 1
        span[1] += wall if isinstance(wall, (int, float)) else 0.0
        span[2] += wait if isinstance(wait, (int, float)) else 0.0
        n = fields.get("n", 0)
        now = time.perf_counter()
        if fields.get("phase") in ("active", "warmup"):
            self._full_until = n + 1 + FULL_STEPS if isinstance(n, int) else self._full_until
        elif isinstance(n, int) and n >= self._full_until and now < self._next_line:
            self._last = fields
            self._last_t = time.time()  # its line, if written at close, says when it ended
            return
        self._next_line = now + SLICE_S
        self._step_line(fields)

    def _step_line(self, fields: dict) -> None:
        span = self._span
        line = dict(fields)
        for key in ("wall_ms", "data_wait_ms"):  # to the µs, as every figure a line holds
            if isinstance(line.get(key), float):
                line[key] = round(line[key], 3)
        if span[0] > 1:
            line.update(span_steps=span[0], span_wall_ms=round(span[1], 3),
                        span_data_wait_ms=round(span[2], 3))
        self._span = [0, 0.0, 0.0]
        self._last = None
        self._write(layout.encode(layout.record(layout.STEP, self.rank, **capped(line))))

    def _write(self, line: bytes) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.write(line)
                self._file.flush()

    def emit_dict(self, record: dict) -> None:
        record = dict(record)
        self.emit(str(record.pop("event", "message")), **record)

    def finish(self, rc: int | None, reason: str, **fields) -> None:
        """Close the log with the run's `finished` record (layout.append_finished)."""
        self.close()
        layout.append_finished(self.path, rc, reason, self.rank, **capped(fields))

    def close(self) -> None:
        if self._last is not None and pid.current == self._pid and not self._file.closed:
            # the last step has its line (the lines cover every step), stamped with its end
            self._step_line({**self._last, "t": round(self._last_t, 6)})
        if self.record is not None:
            self.record.close()
        with self._lock:
            if not self._file.closed:
                self._file.close()


def capped(value):
    """`value` with every string in it cut to MAX_TEXT characters (head and tail kept, the cut
    said)."""
    if isinstance(value, str):
        if len(value) <= MAX_TEXT:
            return value
        half = MAX_TEXT // 2
        return f"{value[:half]} … [{len(value) - 2 * half:,} characters cut] … {value[-half:]}"
    if isinstance(value, dict):
        return {k: capped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [capped(v) for v in value]
    return value


def prepare_session(path: Path) -> Path:
    path = path.expanduser().resolve()
    try:
        (path / layout.TRACES).mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SetupError(f"session folder {path} is not writable: {reason}") from None
    return path


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def run_info(opts: argparse.Namespace, script: Path, torch_info: dict) -> dict:
    return {
        "version": 1,
        "script": str(script),
        "args": opts.script_args,
        "cwd": os.getcwd(),
        "python": sys.executable,
        "python_version": platform.python_version(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "cpu_count": usable_cpus(),  # the recording machine's: the advice caps workers at it
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "schedule": {k: getattr(opts, k) for k in DEFAULT_SCHEDULE},
        "options": {
            "profile_memory": opts.profile_memory, "record_shapes": opts.record_shapes,
            "with_stack": opts.with_stack, "stop_after_window": opts.stop_after_window,
            "nproc_per_node": opts.nproc_per_node, "lineprof": opts.lineprof,
            "lineprof_depth": opts.lineprof_depth, "profile_every": opts.profile_every,
            "profile_at": list(opts.profile_at), "profile_epochs": opts.profile_epochs,
        },
        "overrides": list(opts.sets),
        "runner": str(Path(__file__).resolve().with_name("runner.py")),
        "runner_argv": opts.argv,
        **torch_info,
    }


def write_run_json(session: Path, info: dict) -> None:
    tmp = session / f".{layout.RUN_JSON}.{os.getpid()}.part"
    tmp.write_text(json.dumps(info, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, session / layout.RUN_JSON)


def update_run_json(session: Path, **fields) -> None:
    """Add fields to run.json once the run has ended (e.g. the DataLoaders it built)."""
    try:
        info = json.loads((session / layout.RUN_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(info, dict):
        info.update(fields)
        write_run_json(session, info)
