"""Repeated profiling windows: --profile-every N, --profile-at 100,5000, --profile-epochs.

torch.profiler takes any callable step -> ProfilerAction as its schedule; this one opens a
window (--warmup steps, then --active recorded steps, the last one saving its own trace) at each
planned start. Epoch starts are known only once they happen (the record sees a new DataLoader
iterator), so those windows are planned on the fly: a step the profiler has already been told
about never changes its answer.
"""

from __future__ import annotations

import argparse


class Windows:
    """The schedule callable. `record` (capture/record.RunRecord) tells the epoch starts."""

    def __init__(self, opts: argparse.Namespace, record=None) -> None:
        from torch.profiler import ProfilerAction

        self.action = ProfilerAction
        self.warmup, self.active = opts.warmup, opts.active
        self.every = opts.profile_every
        self.first = opts.wait + opts.warmup
        self.starts: list[int] = sorted(set(opts.profile_at))
        self.epochs = bool(opts.profile_epochs)
        self.record = record
        self.epochs_seen: dict[int, int] = {}
        self.highest = -1  # the latest step the profiler has been answered for

    def _plan(self, n: int) -> None:
        fresh = n > self.highest
        self.highest = max(self.highest, n)
        main = self.record.main_loader() if self.epochs and self.record is not None else None
        if main is None:
            return
        if main.epochs > self.epochs_seen.get(main.index, 0):  # the training loader's epochs
            self.epochs_seen[main.index] = main.epochs
            begin = n if fresh else self.highest + 1  # warmup from the first undecided step
            self._add(begin + self.warmup)

    def _add(self, start: int) -> None:
        last = self.window_of(start - 1)
        if last is None or last[1] < start - self.warmup:
            self.starts.append(start)
            self.starts.sort()

    def window_of(self, n: int) -> tuple[int, int] | None:
        """The planned window [lo, hi] of recorded steps holding step n, if any."""
        for s in self._starts_near(n):
            if s <= n < s + self.active:
                return s, s + self.active - 1
        return None

    def _starts_near(self, n: int) -> list[int]:
        near = [s for s in self.starts if s - self.warmup <= n < s + self.active]
        if self.every > 0 and n >= self.first:
            k = (n - self.first) // self.every
            near += [self.first + j * self.every for j in (k, k + 1)]
        elif self.every > 0:
            near.append(self.first)
        return near

    def __call__(self, n: int):
        self._plan(n)
        for s in self._starts_near(n):
            if s <= n < s + self.active:
                last = n == s + self.active - 1
                return self.action.RECORD_AND_SAVE if last else self.action.RECORD
            if s - self.warmup <= n < s:
                return self.action.WARMUP
        return self.action.NONE


def window_range(schedule, hi: int) -> tuple[int, int]:
    """[lo, hi] of the recorded steps ending at step hi, from any schedule callable."""
    lo = hi
    while lo > 0 and schedule(lo - 1).name.startswith("RECORD") and \
            schedule(lo - 1).name != "RECORD_AND_SAVE":
        lo -= 1
    return lo, hi
