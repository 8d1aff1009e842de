"""How much of their wall time a trial's DataLoader workers want a CPU (issue 21).

Workers that sleep on I/O (object stores, network file systems, a `time.sleep`) are not limited
by the cores: more of them than cores still help. Workers that compute are: past the cores
they only take turns. The trial samples its process tree (psutil) a few times a second; the
workers are its leaves (under torchrun the ranks have children, the workers). Their share over
a time span = seconds they were on a CPU *or runnable, waiting for one* / (span x workers
alive). On-CPU time alone cannot tell the two cases apart on a busy machine: busy-looping
workers on 2 shared cores were on a CPU 35% of their wall time and runnable most of the rest.
Linux's /proc/<pid>/schedstat gives both (on-CPU and run-queue nanoseconds); elsewhere the CPU
times stand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psutil

BUSY_SHARE = 0.5  # workers wanting a CPU less than this share of their wall time wait on I/O


def tree(root: psutil.Process) -> list[psutil.Process]:
    """The root and every descendant alive now (empty when the root is gone)."""
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def leaves(procs: list[psutil.Process]) -> list[psutil.Process]:
    """The processes below the root that have no children: the DataLoader workers."""
    parents = set()
    for proc in procs[1:]:
        try:
            parents.add(proc.ppid())
        except psutil.Error:
            continue
    return [p for p in procs[1:] if p.pid not in parents]


def wants_cpu_s(proc: psutil.Process) -> float | None:
    """Seconds the process was on a CPU or waiting in a run queue for one (schedstat), else
    its CPU time; None when it is gone."""
    try:
        with open(f"/proc/{proc.pid}/schedstat", "rb") as f:
            on_cpu, queued = f.read().split()[:2]
        return (int(on_cpu) + int(queued)) / 1e9
    except (OSError, ValueError):
        pass
    try:
        times = proc.cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


@dataclass
class WorkerCpu:
    """Samples of a tree's leaf processes: (time, {pid: seconds on or waiting for a CPU})."""

    samples: list[tuple[float, dict[int, float]]] = field(default_factory=list)

    def sample(self, procs: list[psutil.Process], now: float) -> None:
        cpu = {}
        for proc in leaves(procs):
            busy = wants_cpu_s(proc)
            if busy is not None:
                cpu[proc.pid] = busy
        self.samples.append((now, cpu))

    def share(self, t0: float | None = None, t1: float | None = None) -> float | None:
        """Workers' busy seconds / (wall x workers) between the first and last sample inside
        [t0, t1] (the whole trial when unset or too few samples fall inside); None without
        two samples that saw workers."""
        inside = [s for s in self.samples if s[1] and (t0 is None or s[0] >= t0)
                  and (t1 is None or s[0] <= t1)]
        if len(inside) < 2:
            inside = [s for s in self.samples if s[1]]
        if len(inside) < 2:
            return None
        (ta, a), (tb, b) = inside[0], inside[-1]
        used = sum(max(0.0, cpu - a.get(pid, 0.0)) for pid, cpu in b.items())
        alive = sum(len(s[1]) for s in inside) / len(inside)
        wall = tb - ta
        return min(1.0, used / (wall * alive)) if wall > 0 and alive else None
