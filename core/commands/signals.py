"""SIGTERM and SIGHUP to stallscope-cli end what it started, as Ctrl-C does, never leave it
running unseen: `timeout`, a CI job's cancel or a closed terminal sent them, and the runner (in
a session of its own, so that the terminal's signals reach stallscope first) went on alone,
holding the GPU.

    with ended_by_signals():   # in the main thread, around a command
        ...                    # a SIGTERM or SIGHUP raises Terminated (a KeyboardInterrupt)

A run followed (commands/run.follow) is stopped by the one stop rule; a run on a host goes on
there after a SIGHUP (a closed terminal: it is detached by design), with the attach line.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None))
                if s is not None)


class Terminated(KeyboardInterrupt):
    """The process was sent SIGTERM or SIGHUP (`signum`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def hangup(self) -> bool:
        return self.signum == getattr(signal, "SIGHUP", None)


def _raise(signum: int, _frame: object) -> None:
    raise Terminated(signum)


@contextmanager
def ended_by_signals() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, _raise) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
