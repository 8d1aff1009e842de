"""Did a test start a child process? The safety net behind the explicit `runner` marks.

Four signals, together exact for this suite: Python's audit events (subprocess, fork, exec,
posix_spawn, system) name the command; a request to multiprocessing's forkserver (whose
processes are not ours); the page faults of children that were waited for
(getrusage(RUSAGE_CHILDREN)) catch what starts below Python (QProcess, multiprocessing's
spawn); children still alive at the end catch the ones nobody waited for.
"""

from __future__ import annotations

import os
import resource
import sys
from multiprocessing import forkserver

SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn",
                          "os.spawn", "os.exec", "os.system", "pty.spawn"})

_events: list[str] = []


def _audit(event: str, args: tuple) -> None:
    if event in SPAWN_EVENTS:
        _events.append(f"{event} {_command(args)}".strip())


def _command(args: tuple) -> str:
    for arg in args[:2]:
        if isinstance(arg, (list, tuple)) and arg:
            return " ".join(os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in arg)[:160]
    return ""


sys.addaudithook(_audit)  # an audit hook cannot be removed; it only appends to a list


def _forked_by_the_server(connect):
    """A forkserver's processes are its children, not ours, and raise no event here."""
    def watched(fds):
        _events.append("multiprocessing forkserver: a new process")
        return connect(fds)
    return watched


forkserver.connect_to_new_process = _forked_by_the_server(forkserver.connect_to_new_process)


def _children_faults() -> int:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt


def _live_children() -> list[str]:
    import psutil

    try:
        return [" ".join(p.cmdline())[:160] or p.name() for p in psutil.Process().children()]
    except psutil.Error:
        return []


class Watch:
    """Started before a test's setup, read after its teardown."""

    def __init__(self) -> None:
        self.first_event = len(_events)
        self.faults = _children_faults()
        self.alive = set(_live_children())

    def spawned(self) -> list[str]:
        """What the test started, one line each; empty when it started nothing."""
        found = _events[self.first_event:]
        if not found and _children_faults() != self.faults:
            found = ["a child process below Python (QProcess, a pool) was waited for"]
        return found + [f"still running: {c}" for c in _live_children() if c not in self.alive]
