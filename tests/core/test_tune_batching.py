"""Trials whose loader cuts an epoch into another number of steps than the script as written
(an IterableDataset sharded over the workers: each worker's shard ends in a partial batch) are
compared per step of the script as written: their time an epoch over its steps an epoch. Hunt:
100 steps an epoch as written, 112 with 16 workers; tune claimed the per-step 13.47x, 12% above
what the same data took. The tune job on a fake clock (tests/core/fake_tune.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_tune import SCRIPT, run_on_fake_clock

from stallscope.core.tune import job
from stallscope.core.tune.trial import OK, Trial

WALL_S = 10.0
EPOCH_MS = {0: 1000.0, 1: 1000.0, 2: 500.0}  # an epoch's time; 4 workers and more: 480 ms


class ShardedBench:
    """An epoch is the same data whatever the workers; k workers cut it into 100 + 4k steps."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def run_trial(self, launch, trial, folder, deadline, limit, cancel=None):
        trial.session = str(Path(folder) / trial.name)
        self.now += WALL_S
        workers = int({**SCRIPT, **trial.settings}["num_workers"] or 0)
        steps = 100 + 4 * workers
        trial.status, trial.wall_s, trial.epoch_steps = OK, WALL_S, float(steps)
        trial.step_ms = EPOCH_MS.get(workers, 480.0) / steps
        trial.data_wait_ms = 0.5 * trial.step_ms
        trial.data_wait_share, trial.steady_reached, trial.steady_steps = 0.5, True, 200
        trial.worker_cpu = 0.9 if workers else None
        return trial


def test_a_trial_that_cuts_epochs_otherwise_is_compared_per_epoch(tmp_path, monkeypatch):
    result, data = run_on_fake_clock(tmp_path, monkeypatch, ShardedBench(), 1000.0)
    assert data["verdict"] == "faster" and data["best_settings"]["num_workers"] == 2
    # 1000 ms an epoch as written, 500 ms with 2 workers: 2.00x (per step: 10 / 4.63 = 2.16x)
    assert data["speedup"] == pytest.approx(2.0, rel=1e-6)
    two = next(t for t in result.trials if t.settings.get("num_workers") == 2)
    assert two.batching == pytest.approx(108 / 100) and two.step_ms == pytest.approx(5.0)
    assert any(n.startswith("num_workers=2 cuts an epoch into 108 steps where the script as "
                            "written cuts it into 100") for n in result.notes), result.notes


def test_the_same_steps_an_epoch_or_unknown_ones_change_nothing():
    base = Trial(1, "01-as-written", {}, {}, status=OK, step_ms=10.0, epoch_steps=100.0)
    same = Trial(2, "02", {"num_workers": 2}, {"num_workers": 2}, status=OK, step_ms=5.0,
                 epoch_steps=100.5)
    unknown = Trial(3, "03", {"num_workers": 4}, {"num_workers": 4}, status=OK, step_ms=4.0)
    for trial, ms in ((same, 5.0), (unknown, 4.0)):
        assert job.per_script_batches(trial, base) is None
        assert trial.step_ms == ms and trial.batching is None
    assert job.per_script_batches(base, base) is None
