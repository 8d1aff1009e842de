"""A run on this machine: the runner (core/capture/runner.py, by file path) in the chosen
interpreter, in a session of its own, its stdout/stderr read by two threads into a queue that
poll() drains in the caller's thread."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, cast

from stallscope.core.capture import options as runner_options
from stallscope.core.errors import StallscopeError
from stallscope.core.launch.handle import Output, RunHandle
from stallscope.core.launch.job import STOP_GRACE_S, Job, Where, killed_reason, no_record_reason

RUNNER_PATH = Path(runner_options.__file__).resolve().with_name("runner.py")
CHUNK = 65536


def runner_command(python: str, job: Job) -> list[str]:
    argv = runner_options.build_argv(job.session, job.script, list(job.args), job.schedule,
                                     job.options)
    return [python, str(RUNNER_PATH), *argv]


def script_env(extra: dict) -> dict:
    env = {**os.environ, **extra, "PYTHONUNBUFFERED": "1"}
    env.pop("QT_QPA_PLATFORM", None)  # the app's display setting is not the script's business
    return env


def descendants(pid: int) -> list:
    """psutil.Process of every descendant of `pid` (none once it ended)."""
    try:
        import psutil

        found: list = psutil.Process(pid).children(recursive=True)
        return found
    except Exception:  # noqa: BLE001 - the process just ended
        return []


class LocalRun(RunHandle):
    def __init__(self, where: Where, job: Job, on_output: Output | None = None) -> None:
        super().__init__(Path(job.session), on_output)
        python = where.python or sys.executable
        self._out: queue.Queue = queue.Queue()
        try:
            self.proc = subprocess.Popen(
                runner_command(python, job), cwd=where.cwd or None, env=script_env(job.env),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True)
        except OSError as exc:
            raise StallscopeError(
                f"cannot start the interpreter {python}: {exc.strerror or exc}") from None
        self.local_pid = self.proc.pid
        self._readers = [self._reader(cast(IO[bytes], self.proc.stdout), False),  # PIPEs: set
                         self._reader(cast(IO[bytes], self.proc.stderr), True)]
        self._seen: list = []          # descendants seen at the SIGTERM: they may outlive it
        self._kill_at: float | None = None

    def _reader(self, pipe: IO[bytes], is_err: bool) -> threading.Thread:
        def read() -> None:
            fd = pipe.fileno()
            while True:
                try:
                    data = os.read(fd, CHUNK)
                except OSError:
                    data = b""
                self._out.put((data, is_err))
                if not data:
                    return

        thread = threading.Thread(target=read, daemon=True, name="stallscope-output")
        thread.start()
        return thread

    def interrupt(self) -> None:
        """SIGINT to the runner (a Ctrl-C the terminal gave stallscope, passed on)."""
        if self.proc.poll() is None:
            self._signal(signal.SIGINT)

    def _signal(self, signum: int) -> None:
        try:
            os.kill(self.proc.pid, signum)
        except OSError:
            pass

    def _stop(self, grace: float | None) -> None:
        self._seen = descendants(self.proc.pid)
        grace = STOP_GRACE_S if grace is None else grace
        if grace > 0:
            self._signal(signal.SIGTERM)
        self._kill_at = time.monotonic() + grace
        if grace <= 0:
            self._kill()

    def _kill(self) -> None:
        """SIGKILL to the runner's process group (it leads its own; after it exited the group
        may hold orphans) and every descendant seen, or still there."""
        tree = self._seen + (descendants(self.proc.pid) if self.proc.poll() is None else [])
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for p in tree:
            try:
                p.kill()
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._kill_at = None

    def _drain(self) -> int:
        closed = 0
        while True:
            try:
                data, is_err = self._out.get_nowait()
            except queue.Empty:
                return closed
            if data:
                self._output(data, is_err)
            else:
                closed += 1

    def _advance(self) -> None:
        self._closed = getattr(self, "_closed", 0) + self._drain()
        if self._kill_at is not None and time.monotonic() >= self._kill_at:
            self._kill()
        rc = self.proc.poll()
        if rc is None or self._exit is not None:
            return
        if self.stopping or self._seen:
            self._kill()  # no orphaned DataLoader worker
        for thread in self._readers:  # the pipes close with the last process holding them
            thread.join(0.5)
        self._closed += self._drain()
        self._exit = (rc, killed_reason(-rc) if rc < 0 else no_record_reason(rc))
