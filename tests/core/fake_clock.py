"""A clock the test moves: stands in for the `time` module of the runner's writer, record and
stepper (perf_counter, time, strftime)."""

from __future__ import annotations


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def time(self) -> float:
        return 1.7e9 + self.now

    def strftime(self, fmt: str) -> str:
        return "x"
