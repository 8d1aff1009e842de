"""The workers' CPU share when the workers end and start anew (hunt: s1_trainval.py): a
DataLoader without persistent workers ends them at each epoch's end, and a trial longer than an
epoch sees several generations of them. A worker that computes reads on a CPU nearly all the
time it could run whichever generation it belongs to; one that sleeps, hardly ever."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from stallscope.core.tune import cpu

SAMPLE_S = 0.25  # as core/tune/trial.py samples a trial


def restarting(busy: float, epochs: int = 3, epoch_s: float = 2.0, gap_s: float = 0.1,
               workers: int = 2) -> cpu.WorkerCpu:
    """Samples every SAMPLE_S of a trial whose `workers` workers live one epoch each: they
    start `gap_s` after the epoch's start (none alive in between) and compute `busy` of every
    second until its end; each epoch's workers are new processes (new pids). The main process
    (pid 1) computes all the time; the machine (2 cores) does nothing else."""
    out = cpu.WorkerCpu()
    for i in range(int(epochs * epoch_s / SAMPLE_S) + 1):
        t = i * SAMPLE_S
        epoch = min(int(t // epoch_s), epochs - 1)
        born = epoch * epoch_s + gap_s
        alive = {100 + epoch * workers + w: (busy * (t - born), 0.0)
                 for w in range(workers)} if t >= born else {}
        lived = sum(max(0.0, min(t, (e + 1) * epoch_s) - e * epoch_s - gap_s)
                    for e in range(epochs))  # every worker so far, ended ones included
        out.samples.append(cpu.Sample(1000.0 + t, alive, {1: (t, 0.0), **alive},
                                      t + busy * workers * lived, 2))
    return out


@pytest.mark.parametrize("busy, share", [(1.0, 1.0), (0.02, 0.02)])
def test_workers_that_restart_each_epoch_count_over_their_own_lives(busy, share):
    # the s1 tune read 0.0-0.12 for a spinning __getitem__ in every trial that ran past its
    # 40-step epoch, and 1.0 in those that stayed inside one
    assert restarting(busy).share() == pytest.approx(share)
    assert restarting(busy, epochs=1, epoch_s=6.0).share() == pytest.approx(share)
    # inside a steady window that spans the middle epoch's restart (trial.measure's t0, t1)
    assert restarting(busy).share(1001.0, 1005.0) == pytest.approx(share)


@pytest.mark.runner
def test_a_spinning_worker_started_anew_reads_on_a_cpu():
    """A real process tree: a parent that runs three spinning children one after another (as
    epochs of non-persistent workers), sampled as a trial samples it."""
    code = ("import subprocess, sys\n"
            "spin = 'import time\\nt = time.time()\\nwhile time.time() - t < 0.8: pass'\n"
            "for _ in range(3):\n"
            "    subprocess.run([sys.executable, '-c', spin])\n")
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        root, workers = psutil.Process(parent.pid), cpu.WorkerCpu()
        while parent.poll() is None:
            workers.sample(cpu.tree(root), time.time())
            time.sleep(0.1)
    finally:
        parent.kill()
        parent.wait()
    pids = {pid for s in workers.samples for pid in s.workers}
    assert len(pids) >= 2, pids  # it saw more than one generation of workers
    share = workers.share()
    assert share is not None and share > 0.8, share


def test_workers_that_ended_at_an_epochs_end_are_not_other_work():
    # counting the processes alive at the last sample only, the CPU of the workers that ended
    # went to other work: 63% of 2 cores here, with nothing else running (the samples miss
    # each worker's last quarter second: 8% here)
    others, steal = restarting(1.0).contention()
    assert others is not None and others < 0.1 and steal == 0.0
    assert not cpu.busy(others, 0.5)
