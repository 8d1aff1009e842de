"""Ending a process and everything it started (DataLoader workers, ranks it launched): SIGTERM
to it first, then SIGKILL to its process group and to every process seen in its tree.

    tree = ProcessTree(pid)
    tree.terminate()          # remembers the children, then SIGTERM
    tree.kill(running=True)   # after a grace period: whatever is left
"""

from __future__ import annotations

import os
import signal


def children(pid: int) -> list:
    """psutil.Process of every descendant of `pid` (none without psutil or once it ended)."""
    try:
        import psutil

        return psutil.Process(pid).children(recursive=True)
    except Exception:  # noqa: BLE001 - psutil missing or the process just ended
        return []


class ProcessTree:
    def __init__(self, pid: int = 0) -> None:
        self.pid = pid
        self.seen: list = []  # descendants seen before the SIGTERM: they may outlive it

    def terminate(self) -> None:
        if self.pid <= 0:
            return
        self.seen = children(self.pid)
        try:
            os.kill(self.pid, signal.SIGTERM)
        except OSError:
            pass

    def kill(self, running: bool) -> None:
        """SIGKILL to the process group (the runner leads its own; also after it has exited:
        the group may hold orphans) and to every descendant seen, and any still there."""
        tree = self.seen + (children(self.pid) if running else [])
        if self.pid > 0 and hasattr(os, "killpg"):
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
        for proc in tree:
            try:
                proc.kill()
            except Exception:  # noqa: BLE001 - already gone
                pass
