"""Long jobs are generators that yield (done, total) and return their result.

They check a CancelFlag between chunks and raise Cancelled when it is set. The GUI wraps any
job in one worker (gui/workers.py); the CLI drains it with `run_job`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from typing import TypeVar

from stallscope.core.errors import Cancelled

T = TypeVar("T")
Job = Generator[tuple[int, int], None, T]


class CancelFlag:
    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise Cancelled("cancelled")


def run_job(job: Job[T], progress: Callable[[int, int], None] | None = None) -> T:
    """Drain a job, optionally reporting progress, and return its result."""
    try:
        while True:
            done, total = next(job)
            if progress is not None:
                progress(done, total)
    except StopIteration as stop:
        result: T = stop.value
        return result
