"""The run's process tree: Stop (SIGTERM) for the script, its DataLoader workers, processes
it leaves behind, the signals it dies of, and the end of the runner itself.

After `finished`, the runner gives the interpreter GRACE_S to exit; a non-daemon thread or an
atexit handler of the script that holds it longer is named on stderr and the run is ended (its
process group when it leads one) with the exit code already recorded.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING

from .exits import Stopped, say

if TYPE_CHECKING:
    from types import FrameType

GRACE_S = float(os.environ.get("STALLSCOPE_EXIT_GRACE_S", "5"))
# Signals whose default action ends the process and that a script sets off itself (alarm(),
# setitimer, a parent's hang-up): recorded as the run's end, then died of for real.
DEADLY = tuple(getattr(signal, name) for name in ("SIGALRM", "SIGVTALRM", "SIGPROF", "SIGHUP",
                                                   "SIGUSR1", "SIGUSR2")
               if hasattr(signal, name))
KEEP = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


class Killed(Stopped):
    """A deadly signal the script set off (signal.alarm without a handler, ...)."""


def has_children() -> bool:
    mp = sys.modules.get("multiprocessing")
    return bool(mp and mp.active_children())


def end_children(timeout: float = 2.0) -> None:
    """On Stop: end DataLoader workers now. Interrupted mid-fetch, their iterator would
    otherwise wait out torch's 5 s join timeout per worker."""
    import multiprocessing

    children = multiprocessing.active_children()
    quiet_child_deaths()
    for child in children:
        child.terminate()
    deadline = time.monotonic() + timeout
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))


def quiet_child_deaths() -> None:
    """The runner ends the children itself now: their deaths are not the script's error.
    torch's SIGCHLD handler raises in the main thread for a DataLoader worker that died of a
    signal, which one still starting (before its loop sets torch's own SIGTERM handler) does
    when it is ended."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    except (AttributeError, ValueError, OSError):  # no SIGCHLD (Windows), not the main thread
        pass


class _Ending:
    """The signal the run is ending by, until the runner has caught its exception. Raised in
    a place that swallows it (a DataLoader iterator's __del__ prints and drops exceptions),
    the exception is raised again, after a random pause of RETRY_S, until it reaches the
    runner."""

    signum: int | None = None
    caught = False
    retrying = False


RETRY_S = (0.2, 0.7)  # a random pause: a loop of a fixed period cannot swallow every retry


def install_stop_handler() -> None:
    """SIGTERM (Stop) and the deadly signals raise in the main thread, so the run still ends
    with `finished`; a forked process that inherited the handler just dies of the signal. A
    second SIGTERM from outside ends the runner at once."""
    main_pid = os.getpid()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != main_pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if _Ending.retrying:
            _Ending.retrying = False
        elif _Ending.signum is not None:  # a second one from outside: end now
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        else:
            _Ending.signum = signum
            threading.Thread(target=_raise_until_caught, args=(signum,), daemon=True,
                             name="stallscope-stop").start()
        raise Stopped(signum) if signum == signal.SIGTERM else Killed(signum)

    for signum in (signal.SIGTERM, *DEADLY):
        try:
            if signum == signal.SIGTERM or signal.getsignal(signum) == signal.SIG_DFL:
                signal.signal(signum, on_signal)
        except (ValueError, OSError):
            pass


def _raise_until_caught(signum: int) -> None:
    import random

    while True:
        time.sleep(random.uniform(*RETRY_S))
        if _Ending.caught:
            return
        _Ending.retrying = True
        try:
            signal.pthread_kill(threading.main_thread().ident or 0, signum)  # started: an ident
        except (OSError, ValueError, AttributeError):
            return


def ending_caught() -> None:
    """The runner has the Stopped/Killed exception: no more retries."""
    _Ending.caught = True


def script_over() -> None:
    """The script has ended: a Stop now lets the runner write what it has and `finished`
    (a second one still ends it at once); nothing is raised into the runner's own ending."""
    ending_caught()

    def on_term(signum: int, frame: FrameType | None) -> None:
        signal.signal(signum, signal.SIG_DFL)

    try:
        signal.signal(signal.SIGTERM, on_term)
    except (ValueError, OSError):
        pass


def disarm_timers() -> None:
    """The script is over: an alarm it set must not end the runner afterwards."""
    try:
        signal.alarm(0)
        for which in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
            signal.setitimer(which, 0)
    except (AttributeError, ValueError, OSError):
        pass
    for signum in DEADLY:
        try:
            signal.signal(signum, signal.SIG_DFL)
        except (ValueError, OSError):
            pass


def die_of(signum: int) -> None:
    """End this process by `signum`, so its exit status is the real one."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    time.sleep(1)
    os._exit(128 + signum)


def descendants(root: int | None = None) -> list[tuple[int, str]]:
    """(pid, command line) of every live process below `root` (default: this one), from
    /proc; where there is none, multiprocessing's children only."""
    root = os.getpid() if root is None else root
    parents: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        mp = sys.modules.get("multiprocessing")
        kids = mp.active_children() if mp and root == os.getpid() else []
        return [(c.pid, c.name) for c in kids if c.pid]
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            fields = stat[stat.rfind(b")") + 2:].split()
            if fields[0] != b"Z":
                parents[int(name)] = int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child, parent in parents.items():
            if parent == pid:
                out.append(child)
                todo.append(child)
    return [(pid, _cmdline(pid)) for pid in sorted(out)]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read(400).replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return "?"


def end_leftovers(wait_s: float = 1.0) -> list[dict]:
    """After the script: processes it left running (a forked child, a worker never joined)
    are ended (SIGTERM, then SIGKILL); returns them as {pid, command}."""
    left = [(pid, cmd) for pid, cmd in descendants() if not any(k in cmd for k in KEEP)]
    if left:
        quiet_child_deaths()
    for pid, _ in left:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    alive = [pid for pid, _ in left]
    while alive and time.monotonic() < deadline:
        _reap()
        alive = [pid for pid in alive if _alive(pid)]
        time.sleep(0.02)
    for pid in alive:
        _signal(pid, signal.SIGKILL)
    _reap()
    # a process already on its way out (its command line reads empty: a rank the script
    # launched, past its `finished`) that ended within the wait is not one it left running
    return [{"pid": pid, "command": cmd} for pid, cmd in left if cmd or pid in alive]


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:
        pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rfind(b")") + 2:][:1] != b"Z"
    except OSError:
        return False


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except (ChildProcessError, OSError):
            return
        if pid == 0:
            return


def exit_watchdog(rc: int, leads_group: bool, grace_s: float = GRACE_S) -> None:
    """After `finished`: if the interpreter is still here grace_s later (a non-daemon thread,
    a blocking atexit handler), say what holds it and end the run with `rc`."""
    main = threading.main_thread()

    def watch() -> None:
        time.sleep(grace_s)
        say(f"the run ended {grace_s:g} s ago but {holder(main)} still holds the interpreter; "
            f"ending it (exit code {rc})")
        end_leftovers(0.5)
        if leads_group and hasattr(os, "killpg"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                os.killpg(os.getpgrp(), signal.SIGTERM)
            except OSError:
                pass
        os._exit(rc)

    threading.Thread(target=watch, name="stallscope-exit-watchdog", daemon=True).start()


def holder(main: threading.Thread) -> str:
    """What keeps the interpreter from exiting: a thread the script started, or the place
    the main thread waits in (an atexit handler)."""
    threads = [t.name for t in threading.enumerate()
               if t is not main and not t.daemon and t.is_alive()]
    if threads:
        return "a non-daemon thread of the script (" + ", ".join(threads[:5]) + ")"
    frame = sys._current_frames().get(main.ident) if main.ident is not None else None
    stack = traceback.extract_stack(frame) if frame is not None else []
    user = [f for f in stack if "/capture/" not in f.filename and "threading" not in f.filename]
    where = f" ({user[-1].name} at {user[-1].filename}:{user[-1].lineno})" if user else ""
    return "an atexit handler" + where


def new_process_group() -> None:
    if hasattr(os, "setpgrp"):
        try:
            os.setpgrp()
        except OSError:
            pass
