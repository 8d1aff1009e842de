"""Run a command so that nothing it starts outlives it: the launcher becomes the child subreaper
of its descendants (Linux prctl PR_SET_CHILD_SUBREAPER), so a process that double-forks and calls
os.setsid() is re-parented to the launcher instead of init, and the launcher ends every
descendant when the command ends (or when it is sent SIGTERM / SIGINT). Stdlib only.

    python -m stallscope.core.capture.contain -- python -m x ARGS   # exits with the command's code

Where prctl is not there (not Linux) the command still runs; only its process group is ended.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import FrameType

PR_SET_CHILD_SUBREAPER = 36
SWEEPS = 200  # rounds of "kill every child, reap it"; a fork bomb outpacing this is not ended


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process (True when the kernel agreed)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        agreed: bool = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        return agreed
    except (OSError, AttributeError):
        return False


def children(pid: int | None = None) -> list[int]:
    """The live (not zombie) processes whose parent is `pid` (default: this one)."""
    pid = os.getpid() if pid is None else pid
    found: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[0] != b"Z" and int(fields[1]) == pid:
            found.append(int(name))
    return found


def sweep() -> int:
    """SIGKILL every descendant (they are all this subreaper's children once their parents
    die) and reap them, until none is left. Returns how many were ended."""
    ended = 0
    for _ in range(SWEEPS):
        _reap()
        kids = children()
        if not kids:
            break
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
                ended += 1
            except OSError:
                pass
        time.sleep(0.01)
    _reap()
    return ended


def _reap() -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        print("usage: python -m stallscope.core.capture.contain -- COMMAND [ARGS]",
              file=sys.stderr)
        return 2
    become_subreaper()
    if sys.version_info >= (3, 11):
        proc = subprocess.Popen(args, process_group=0)
    else:  # the runner may run on the remote's older Python; no threads run here yet
        proc = subprocess.Popen(args, preexec_fn=os.setpgrp)
    stopping: list[int] = []

    def stop(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    rc = proc.wait()
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # what stayed in the command's group
    except OSError:
        pass
    sweep()
    return 128 + stopping[0] if stopping else (rc if rc >= 0 else 128 - rc)


if __name__ == "__main__":
    sys.exit(main())
