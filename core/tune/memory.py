"""Memory of a trial's process tree, the memory a tune may use, and the check before a trial.

A DataLoader worker is a child of the runner. What one more worker costs is its unique memory
(USS: pages no other process maps; pages it still shares copy-on-write with the runner are
counted once, in the runner's resident-minus-shared memory). So a trial with W workers needs
about main + W x (unique memory of one worker) of free memory.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass

import psutil

from stallscope.core import units
from stallscope.core.errors import StallscopeError
from stallscope.core.tune.cpu import leaves, tree

SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
GUARD = 0.95  # a running trial is stopped when its private memory passes this share of the limit


def parse_size(text: str) -> int:
    """'2G', '1500M', '512MiB', '1e9' (bytes) -> bytes."""
    m = SIZE_RE.match(str(text))
    if m is None:
        try:
            value = float(text)
        except ValueError:
            raise StallscopeError(f"memory size {text!r}: expected a number of bytes or "
                                  "one like 2G, 1500M") from None
        if value <= 0:
            raise StallscopeError(f"memory size {text!r} must be > 0")
        return int(value)
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    value = float(m.group(1)) * scale
    if value <= 0:
        raise StallscopeError(f"memory size {text!r} must be > 0")
    return int(value)


def memory_limit(explicit: int | None = None) -> int:
    """What a tune may use: an explicit limit, STALLSCOPE_MEMORY_LIMIT, or the free memory."""
    if explicit:
        return int(explicit)
    env = os.environ.get("STALLSCOPE_MEMORY_LIMIT")
    if env:
        return parse_size(env)
    return int(psutil.virtual_memory().available)


@dataclass
class TreeMemory:
    """Peaks over a trial's samples (bytes)."""

    rss: int = 0            # the whole tree's resident memory (sum)
    private: int = 0        # the tree's private memory: main + the children's unique memory
    main: int = 0           # the runner's resident - shared memory
    per_worker: int = 0     # the largest unique memory of one leaf child (a DataLoader worker)
    workers: int = 0        # the most leaf children seen at once
    # A child's USS reads its whole smaps: with 16 workers on 2 cores, four times a second,
    # that took CPU from the trial it measures. Between USS samples, resident - shared stands.
    uss_every_s: float = 2.0
    _uss_at: float = -1e9

    def sample(self, root: psutil.Process) -> int:
        """Add one sample of the tree under `root`; returns its private memory now."""
        return self.add(tree(root))

    def add(self, procs: list[psutil.Process]) -> int:
        """Add one sample of a process tree (its root first); returns its private memory."""
        rss = private = 0
        children = 0
        workers = {p.pid for p in leaves(procs)}
        now = time.monotonic()
        uss = now - self._uss_at >= self.uss_every_s
        if uss:
            self._uss_at = now
        for i, proc in enumerate(procs):
            try:
                info = proc.memory_info()
                own = max(0, info.rss - getattr(info, "shared", 0))
                if i and uss:
                    own = getattr(proc.memory_full_info(), "uss", own)
            except psutil.Error:
                continue
            rss += info.rss
            private += own
            if i == 0:
                self.main = max(self.main, own)
            elif proc.pid in workers:  # not torchrun nor a rank (they have children)
                children += 1
                if uss:  # what one more worker costs: its unique memory only
                    self.per_worker = max(self.per_worker, own)
        self.rss = max(self.rss, rss)
        self.private = max(self.private, private)
        self.workers = max(self.workers, children)
        return private


def predicted(workers: int, main: int, per_worker: int) -> int:
    return main + workers * per_worker


def over_limit_text(workers: int, main: int, per_worker: int, limit: int, source: str) -> str:
    need = predicted(workers, main, per_worker)
    return (f"{units.plural(workers, 'worker')} x {units.size(per_worker)} (per worker in "
            f"{source}) + {units.size(main)} main = {units.size(need)} > "
            f"{units.size(limit)} available")
