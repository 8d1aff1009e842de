"""How a run ends: the runner's exceptions, exit codes and the reasons it records."""

from __future__ import annotations

import sys

from .tee import runner_stderr

EXIT_SETUP = 2  # the runner could not start the script (like python's own "can't open file")
STOPPED_REASON = "stopped after profiling window"
NO_STEPS = ("no steps were seen: the script never finished an optimizer.step() nor fetched a "
            "torch DataLoader batch")


class SetupError(Exception):
    """Something stops the runner before the script starts; one line for the user."""


class StopAfterWindow(SystemExit):
    """Raised from a step hook once the profiling window's trace is written."""

    def __init__(self) -> None:
        super().__init__(0)


class Stopped(SystemExit):
    """Raised in the main thread when SIGTERM arrives (the app's Stop button)."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


def say(message: str) -> None:
    runner_stderr(f"stallscope: {message}\n")


def exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
