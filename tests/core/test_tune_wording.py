"""One of a thing is singular in tune's notes (hunt item 8 found "while 1 worker start" and
"merged over 1 worker processes" elsewhere): one worker, one core."""

from __future__ import annotations

from pathlib import Path

from fake_tune import SCRIPT
from test_tune_busy import Bench, sequence, tune

from stallscope.core.tune import Search
from stallscope.core.tune.memory import over_limit_text


def test_one_core_is_a_core():
    search = Search(SCRIPT, cores=1)
    while (settings := search.next()) is not None:
        step = 100.0 if settings["num_workers"] == 0 else 60.0
        search.record(settings, step, 0.6, 0.95 if settings["num_workers"] else None)
    assert search.climb_note() == ("workers are on a CPU 95% of the time they could run "
                                   "(CPU-bound): tried one rung past the 1 core; tried up to 2")
    capped = Search(SCRIPT, cores=1, most=1)
    while (settings := capped.next()) is not None:
        capped.record(settings, 100.0 if settings["num_workers"] == 0 else 60.0, 0.6, 0.95)
    assert capped.climb_note().endswith("stopped at the limit of 1 worker")
    assert over_limit_text(1, 300 << 20, 500 << 20, 512 << 20, "trial 2").startswith(
        "1 worker x 500.0 MiB (per worker in trial 2)")


def test_one_worker_measured_no_faster_than_none(tmp_path: Path, monkeypatch):
    # 1 worker reads 10% faster once (a small gain: a duel), its repeats no faster; 2 workers
    # far slower (the climb ends)
    table = {0: [100.0], 1: [90.0, 102.0], 2: [150.0]}
    _, data = tune(tmp_path, monkeypatch, Bench(sequence(table), worker_cpu=0.95))
    assert any(n.startswith("1 worker measured no faster than 0 (within noise: ")
               for n in data["notes"]), data["notes"]
