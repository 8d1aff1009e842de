"""The tune job's order and its budget with measured-trial fixtures (no processes): the climb's
leader is confirmed against the script as written before any setting beside num_workers, the
fewest workers within noise are kept, the budget is a ceiling and says what it left open
(issue 31). Each trial's figures come from a table of step times; the clock is the trials'."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_tune import SCRIPT, run_on_fake_clock

from stallscope.core.tune import Search, noise
from stallscope.core.tune.trial import OK, OVER_BUDGET

WALL_S = 10.0


class Bench:
    """Trials measured from `steps(settings) -> ms`, each WALL_S of a fake clock."""

    def __init__(self, steps, cpu: float = 0.9):
        self.now, self.steps, self.cpu = 1000.0, steps, cpu

    def monotonic(self) -> float:
        return self.now

    def run_trial(self, launch, trial, folder, deadline, limit, cancel=None):
        trial.session = str(Path(folder) / trial.name)
        if self.now + WALL_S > deadline:  # stopped at the ceiling, not finished past it
            trial.wall_s, self.now = deadline - self.now, deadline
            trial.status, trial.message = OVER_BUDGET, "the time budget ran out during it"
            return trial
        self.now += WALL_S
        step = self.steps({**SCRIPT, **trial.settings})
        trial.status, trial.step_ms, trial.wall_s = OK, step, WALL_S
        trial.data_wait_share, trial.steady_reached, trial.steady_steps = 0.5, True, 20
        trial.worker_cpu = self.cpu if trial.settings.get("num_workers") else None
        return trial


def tune(tmp_path: Path, monkeypatch, steps, budget_s: float = 1000.0, cpu: float = 0.9):
    return run_on_fake_clock(tmp_path, monkeypatch, Bench(steps, cpu), budget_s)


def two_workers_win(s: dict) -> float:
    """3x with 2 workers; 4 no faster (2 cores); persistent_workers 20% more."""
    ms = {0: 300.0, 1: 150.0}.get(s["num_workers"], 100.0)
    return ms / 1.2 if s["persistent_workers"] else ms


def test_the_leader_is_confirmed_before_any_setting_beside_num_workers(tmp_path, monkeypatch):
    result, data = tune(tmp_path, monkeypatch, two_workers_win)
    names = [t.name for t in result.trials]
    first_side = next(i for i, t in enumerate(result.trials) if t.settings["persistent_workers"])
    pairs = [i for i, n in enumerate(names) if "-pair" in n]
    # 0, 1, 2 workers, one rung past the 2 cores (4, CPU-bound), then the pairs, then the rest
    assert [t.settings["num_workers"] for t in result.trials[:4]] == [0, 1, 2, 4]
    assert pairs and max(pairs[:2]) < first_side
    assert data["verdict"] == "faster" and data["best_settings"]["persistent_workers"] is True
    assert data["speedup"] == pytest.approx(3.6)  # the side setting confirmed as well
    assert any(n.startswith("workers are on a CPU") and "one rung past the 2 cores" in n
               for n in result.notes)


def test_a_budget_that_ends_before_the_pairs_claims_nothing(tmp_path, monkeypatch):
    # 4 trials of the climb fit, the leader's repeat does not
    result, data = tune(tmp_path, monkeypatch, two_workers_win, budget_s=52.0)
    assert sum(t.wall_s for t in result.trials) <= 52.0  # a ceiling, the last trial stopped
    assert data["verdict"] == "not confirmed" and data["speedup"] is None
    assert data["leader_settings"]["num_workers"] == 2
    assert not any(t.settings["persistent_workers"] for t in result.trials)
    assert any("was not confirmed against the script as written" in n for n in data["notes"])
    assert any(n.startswith("the time budget (52 s) ran out") and "num_workers=2" in n
               for n in data["notes"]), data["notes"]


def test_a_budget_that_ends_in_the_climb_names_the_rung_it_did_not_measure(tmp_path,
                                                                           monkeypatch):
    result, data = tune(tmp_path, monkeypatch, two_workers_win, budget_s=28.0)
    assert [t.status for t in result.trials] == ["ok", "ok", "over budget"]
    assert ("the time budget (28 s) ran out during trial 3: whether num_workers=2 is faster "
            "than num_workers=1 was not measured") in data["notes"]
    assert data["verdict"] == "not confirmed" and data["leader_speedup"] == pytest.approx(2.0)


def test_more_workers_no_faster_beyond_the_noise_keep_the_fewest(tmp_path, monkeypatch):
    # I/O-bound workers: 2 workers 1.27x over 1; 4 and 8 read 1.1x faster than 2 in single
    # trials, then their duels against 2 straddle the bar: 2 workers are kept
    def steps(s):
        n = s["num_workers"]
        return {0: 400.0, 1: 127.0, 2: 100.0}.get(n, 91.0)

    calls = {"n": 0}

    def noisy(s):  # 4 workers read 1.1x, then 0.96x, 1.1x ... of 2 workers
        if s["num_workers"] >= 4:
            calls["n"] += 1
            return steps(s) if calls["n"] % 2 else 104.0
        return steps(s)

    result, data = tune(tmp_path, monkeypatch, noisy, cpu=0.05)
    assert data["leader_settings"]["num_workers"] == 2 and data["verdict"] == "faster"
    assert any(n.startswith("4 workers measured no faster than 2 (within noise: ")
               and n.endswith("): keeping 2") for n in data["notes"]), data["notes"]


def test_a_rung_faster_in_every_pair_by_less_than_the_bar_says_so(tmp_path, monkeypatch):
    # 4 workers 3% faster than 2 in every pair (the CPU-bound bench on 2 cores read 1.03-1.05x):
    # not "no faster", and not worth two more workers' memory
    def steps(s):
        return {0: 300.0, 1: 150.0, 2: 100.0}.get(s["num_workers"], 97.0)

    result, data = tune(tmp_path, monkeypatch, steps)
    assert data["leader_settings"]["num_workers"] == 2
    assert ("4 workers measured faster than 2 by less than the 5% a rung must gain (first "
            "1.03x, measured again 1.03x over 1 pair): keeping 2") in data["notes"], data["notes"]
    assert not any("4 workers measured no faster" in n for n in data["notes"])


def test_a_rung_read_slower_first_is_no_faster_however_its_repeat_reads(tmp_path, monkeypatch):
    # 4 workers read 2% slower than 2, then 1% faster when measured again: not "faster"
    calls = {"n": 0}

    def steps(s):
        if s["num_workers"] >= 4:
            calls["n"] += 1
            return 102.0 if calls["n"] == 1 else 99.0
        return {0: 300.0, 1: 150.0}.get(s["num_workers"], 100.0)

    result, data = tune(tmp_path, monkeypatch, steps)
    assert data["leader_settings"]["num_workers"] == 2
    assert any(n.startswith("4 workers measured no faster than 2 (within noise: first 0.98x")
               for n in data["notes"]), data["notes"]


def test_settle_keeps_the_fewest_workers_within_the_measured_noise():
    search = Search(SCRIPT, cores=4)
    search.record(search.next(), 200.0, 0.8)
    search.record(search.next(), 60.0, 0.5)      # 1 worker
    search.record(search.next(), 40.0, 0.3)      # 2: 1.5x, no duel
    search.noise = 0.6                           # repeats of one setting read 60% apart
    search.record(search.next(), 40.0, 0.3)      # 4: no faster
    assert search.next() is not None and search.stage == "around"
    assert search.best.workers == 1
    assert search.settled == ("2 workers measured no faster than 1 (within noise: 40.0 vs "
                              "60.0 ms per step, noise 60%): keeping 1")
    # a best that won its duel stays; so does one beyond the noise
    dueled = Search(SCRIPT, cores=2)
    dueled.record(dueled.next(), 200.0, 0.8)
    dueled.record(dueled.next(), 60.0, 0.5)
    dueled.noise = 0.6
    dueled.record(dueled.next(), 50.0, 0.3, better=True)
    dueled.settle()
    assert dueled.best.workers == 2 and dueled.settled == ""


def test_a_trial_short_of_steady_state_is_always_repeated_before_it_counts():
    search = Search(SCRIPT, cores=4)
    search.record(search.next(), 200.0, 0.8)
    assert search.duel_pairs(50.0) is None                   # 4x on a steady figure: counts
    assert search.duel_pairs(50.0, reached=False) == noise.MIN_PAIRS
    assert search.duel_pairs(195.0, reached=False) is None   # not better at all
    assert noise.spread([[100.0, 110.0], [50.0], [10.0, 14.0, 12.0]]) == pytest.approx(0.4)
    assert noise.spread([]) == 0.0


def test_settings_beside_the_leader_are_measured_against_its_repeats(tmp_path, monkeypatch):
    # the leader's first trial read lucky (80 ms), its repeats 100 ms; persistent_workers at
    # 88 ms is 12% faster than the repeats: tried in a duel and kept (against the lucky
    # figure it would have looked 10% slower)
    seen = {"two": 0}

    def steps(s):
        if s["num_workers"] == 0:
            return 300.0
        if s["persistent_workers"]:
            return 88.0
        if s["num_workers"] == 2:
            seen["two"] += 1
            return 80.0 if seen["two"] == 1 else 100.0
        return 150.0 if s["num_workers"] == 1 else 100.0

    result, data = tune(tmp_path, monkeypatch, steps)
    assert data["verdict"] == "faster" and data["best_settings"]["persistent_workers"] is True
    assert "num_workers=2, persistent_workers=true against num_workers=2: 1.14x, 1.14-1.14x " \
           "over 3 pairs: kept" in data["notes"]


def test_a_small_gain_is_not_repeated_when_the_next_rung_wins_beyond_doubt(tmp_path,
                                                                          monkeypatch):
    # 1 worker 1.15x over the script (a small gain: 3 pairs would confirm it), 2 workers 2x:
    # the next rung is measured first, and the duel over 1 worker is moot
    def steps(s):
        return {0: 300.0, 1: 260.0}.get(s["num_workers"], 150.0)

    result, data = tune(tmp_path, monkeypatch, steps)
    names = [t.name for t in result.trials]
    assert [t.settings["num_workers"] for t in result.trials[:4]] == [0, 1, 2, 4], names
    assert not [n for n in names if "-check" in n and "num_workers=1" in n], names
    assert ("num_workers=1 measured 1.15x over as written, not repeated: num_workers=2 "
            "measured 2.00x over it") in data["notes"], data["notes"]
    assert data["verdict"] == "faster" and data["best_settings"]["num_workers"] == 2


def test_a_rung_measured_ahead_is_not_run_again_after_the_duel(tmp_path, monkeypatch):
    # 1 worker 1.15x, 2 workers 1.25x over the script (not beyond doubt): 1 worker's duel
    # still runs, and the 2-worker trial measured ahead of it is the rung's trial
    def steps(s):
        return {0: 300.0, 1: 260.0}.get(s["num_workers"], 240.0)

    result, data = tune(tmp_path, monkeypatch, steps)
    names = [t.name for t in result.trials]
    assert [t.settings["num_workers"] for t in result.trials[:3]] == [0, 1, 2], names
    checks = [n for n in names if "-check" in n]
    assert any("num_workers=1" in n for n in checks[:2]), names  # 1 worker's duel ran
    plain_two = [n for n in names if n.split("-", 1)[1] == "num_workers=2"]
    assert plain_two == [names[2]], names  # measured once, ahead, and used as the rung
    assert ("num_workers=1 against as written: 1.15x, 1.15-1.15x over 3 pairs: kept"
            in data["notes"]), data["notes"]
    assert not any("not repeated" in n for n in data["notes"]), data["notes"]
