"""The run's process tree: Stop (SIGTERM) for the script, and its DataLoader workers."""

from __future__ import annotations

import os
import signal
import sys
import time

from .exits import Stopped


def has_children() -> bool:
    mp = sys.modules.get("multiprocessing")
    return bool(mp and mp.active_children())


def end_children(timeout: float = 2.0) -> None:
    """On Stop: end DataLoader workers now. Interrupted mid-fetch, their iterator would
    otherwise wait out torch's 5 s join timeout per worker."""
    import multiprocessing

    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    deadline = time.monotonic() + timeout
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))


def install_stop_handler() -> None:
    main_pid = os.getpid()

    def on_term(signum, frame):
        if os.getpid() != main_pid:  # a forked worker inherited this handler: just die
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM ends the runner at once
        raise Stopped(signum)

    try:
        signal.signal(signal.SIGTERM, on_term)
    except (ValueError, OSError):
        pass


def new_process_group() -> None:
    if hasattr(os, "setpgrp"):
        try:
            os.setpgrp()
        except OSError:
            pass
