"""How much of their time a trial's DataLoader workers compute, and whether other work on the
machine took the CPU from the trial (issues 21, 31).

Workers that sleep on I/O (object stores, network file systems, a `time.sleep`) are not limited
by the cores: more of them than cores still help. Workers that compute are: past the cores
they only take turns. The trial samples its process tree a few times a second; the workers are
its leaves (under torchrun the ranks have children, the workers).

A worker's share = its own CPU seconds (utime + stime, /proc/PID/stat) / the wall time it could
have run: its wall time less the time it sat runnable in a run queue (the sum of its threads'
/proc/PID/task/TID/schedstat waits). Counting the run-queue waits as wanting a CPU (the
previous measure) read sleeping workers as computing at load 10: each wake-up waited in the
queue behind other work. Own CPU time over the whole wall reads computing workers as sleeping
on a busy machine: busy-looping workers on 2 shared cores were on a CPU 35% of their wall
time. Left out of the wall, the waits move neither. Without /proc the CPU times stand alone.

The same samples say how busy the machine was: `others` is the share of the machine's CPU time
(/proc/stat) that processes outside the trial used, `steal` the share of the trial's own CPU
want (the seconds it ran + its run-queue waits, every process of the tree, schedstat's
nanoseconds) spent waiting. A trial
ran on a busy machine (`busy`) when other work took at least BUSY_OTHERS of the cores and the
trial waited for a CPU at least BUSY_STEAL of the time it wanted one: either alone is not (an
I/O-bound trial beside other work hardly waits; a trial of 4 computing workers on 2 cores waits
on itself).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from itertools import pairwise

import psutil

BUSY_SHARE = 0.5  # workers computing less than this share of their time wait on I/O
BUSY_OTHERS = 0.25  # other processes used at least this share of the machine's CPU time ...
BUSY_STEAL = 0.15   # ... and the trial waited for a CPU this share of the time it wanted one
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


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


def cpu_s(proc: psutil.Process) -> float | None:
    """The process's own CPU seconds, every thread (utime + stime); None when it is gone."""
    try:
        with open(f"/proc/{proc.pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14, 15)
    except (OSError, ValueError, IndexError):
        pass
    try:
        times = proc.cpu_times()
    except psutil.Error:
        return None
    total: float = times.user + times.system
    return total


def queued_s(proc: psutil.Process) -> tuple[float, float | None]:
    """(seconds the process's threads sat runnable in a run queue, waiting for a CPU; seconds
    they ran) from schedstat, summed over its threads: nanoseconds, where utime + stime count
    10 ms ticks. (0, None) where Linux does not say."""
    queued = ran = 0
    try:
        threads = os.listdir(f"/proc/{proc.pid}/task")
    except OSError:
        return 0.0, None
    for tid in threads:
        try:
            with open(f"/proc/{proc.pid}/task/{tid}/schedstat", "rb") as f:
                on_cpu, waited = f.read().split()[:2]
            ran, queued = ran + int(on_cpu), queued + int(waited)
        except (OSError, ValueError):
            continue
    return queued / 1e9, ran / 1e9


def machine_busy_s() -> tuple[float, int] | None:
    """(CPU seconds the whole machine spent busy since boot, its CPU count) from /proc/stat;
    None elsewhere."""
    try:
        with open("/proc/stat", "rb") as f:
            lines = f.read().splitlines()
        values = [int(v) for v in lines[0].split()[1:]]
        cores = sum(1 for line in lines[1:] if line.startswith(b"cpu"))
    except (OSError, ValueError, IndexError):
        return None
    # user nice system idle iowait irq softirq steal (guest is inside user): idle and iowait
    # are not busy; a VM's steal is time the host took, not this machine's work
    busy = sum(values[:8]) - values[3] - values[4] - (values[7] if len(values) > 7 else 0)
    return busy / _TICK, max(1, cores)


@dataclass
class Sample:
    t: float
    workers: dict[int, tuple[float, float]]  # pid: (CPU seconds, run-queue seconds)
    tree: dict[int, tuple[float, float]]     # every process of the trial: (ran, run-queue)
    machine: float | None = None             # the machine's busy CPU seconds
    cores: int = 1


@dataclass
class WorkerCpu:
    """Samples of a trial's process tree and of the machine."""

    samples: list[Sample] = field(default_factory=list)

    def sample(self, procs: list[psutil.Process], now: float) -> None:
        workers = {p.pid for p in leaves(procs)}
        figures: dict[int, tuple[float, float]] = {}
        ran: dict[int, tuple[float, float]] = {}
        for proc in procs:
            cpu = cpu_s(proc)
            if cpu is None:
                continue
            queued, on_cpu = queued_s(proc)
            figures[proc.pid] = (cpu, queued)
            ran[proc.pid] = (cpu if on_cpu is None else on_cpu, queued)
        machine = machine_busy_s()
        self.samples.append(Sample(now, {p: f for p, f in figures.items() if p in workers},
                                   ran, *(machine or (None, 1))))

    def _span(self, t0: float | None, t1: float | None,
              need_workers: bool) -> tuple[Sample, Sample, list[Sample]] | None:
        def inside(s: Sample) -> bool:
            return (t0 is None or s.t >= t0) and (t1 is None or s.t <= t1)

        usable = [s for s in self.samples if s.workers or not need_workers]
        within = [s for s in usable if inside(s)]
        if len(within) < 2:
            within = usable
        if len(within) < 2 or within[-1].t <= within[0].t:
            return None
        return within[0], within[-1], within

    def share(self, t0: float | None = None, t1: float | None = None) -> float | None:
        """Workers' CPU seconds / (their wall time less their run-queue waits) between the
        first and last sample inside [t0, t1] (the whole trial when unset or too few samples
        fall inside); None without two samples that saw workers.

        Each worker counts over its own life: every stretch between two samples that both saw
        it adds its CPU, its run-queue waits and the stretch's wall time. Workers that a
        DataLoader without persistent workers ends at each epoch's end and starts anew (the
        trial outlives its epochs) are then counted whole; reading the CPU of the workers alive
        at the last sample only, beside the wall time of all of them, read a spinning worker
        0-12% busy (hunt: s1_trainval.py), and the climb went past the cores as for I/O."""
        span = self._span(t0, t1, True)
        if span is None:
            return None
        a, b, _ = span
        used = waited = alive = 0.0
        stretch = [s for s in self.samples if a.t <= s.t <= b.t]  # with the worker-less ones
        for before, after in pairwise(stretch):
            for pid in before.workers.keys() & after.workers.keys():
                (cpu0, queued0), (cpu, queued) = before.workers[pid], after.workers[pid]
                used += max(0.0, cpu - cpu0)
                waited += max(0.0, queued - queued0)
                alive += after.t - before.t
        could_run = alive - waited
        if could_run <= 0:
            return 1.0 if used or waited else None
        return min(1.0, used / could_run)

    def contention(self, t0: float | None = None,
                   t1: float | None = None) -> tuple[float | None, float | None]:
        """(others, steal) over [t0, t1]: the share of the machine's CPU time processes
        outside the trial used, and the share of the trial's CPU want (CPU seconds + run-queue
        waits of every process in its tree) it waited for a CPU. None where not measured.
        Every process the samples saw counts to its last reading: workers that ended at an
        epoch's end used the trial's CPU, not other work's (counting the processes alive at
        the last sample only made their CPU the others')."""
        span = self._span(t0, t1, False)
        if span is None:
            return None, None
        a, b, within = span
        last: dict[int, tuple[float, float]] = {}
        for s in within:
            last.update(s.tree)
        used = waited = 0.0
        for pid, (cpu, queued) in last.items():
            cpu0, queued0 = a.tree.get(pid, (0.0, 0.0))  # born after a: all of it inside
            used += max(0.0, cpu - cpu0)
            waited += max(0.0, queued - queued0)
        steal = waited / (used + waited) if used + waited > 0 else None
        others = None
        if a.machine is not None and b.machine is not None:
            capacity = (b.t - a.t) * b.cores
            others = min(1.0, max(0.0, (b.machine - a.machine - used) / capacity))
        return others, steal


def busy(others: float | None, steal: float | None) -> bool:
    """Other work took the CPU from the trial (see the module's docstring)."""
    return (others is not None and steal is not None and others >= BUSY_OTHERS
            and steal >= BUSY_STEAL)
