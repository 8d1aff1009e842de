"""The tune search, its result and its figures, without processes (the runs are in
test_tune_runs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stallscope.core.errors import StallscopeError
from stallscope.core.tune import Search, Trial, TuneResult, ladder, table, verdict
from stallscope.core.tune.memory import TreeMemory, over_limit_text, parse_size
from stallscope.core.tune.trial import changes_from

SCRIPT = {"num_workers": 0, "pin_memory": False, "persistent_workers": False,
          "prefetch_factor": None}


def drive(search: Search, step_ms_of) -> list[dict]:
    """Run a search against a model of step time; returns the settings tried, in order."""
    tried = []
    while (settings := search.next()) is not None:
        tried.append(settings)
        ms, share = step_ms_of(settings)
        search.record(settings, ms, share)
    return tried


def test_ladder_doubles_up_to_the_cores_from_the_script_value():
    assert ladder(2) == [0, 1, 2]
    assert ladder(6) == [0, 1, 2, 4, 6]
    assert ladder(16, start=3) == [3, 4, 8, 16]
    assert ladder(1) == [0, 1]


def test_search_climbs_while_it_helps_then_tunes_around_the_best():
    # data costs 120 ms per batch over the workers, compute 30 ms; prefetch 4 wins 10%
    def model(s):
        data = 120.0 / max(s["num_workers"], 1) if s["num_workers"] else 120.0
        step = max(data, 30.0) if s["num_workers"] else data + 30.0
        if s.get("prefetch_factor") == 4:
            step *= 0.9
        return step, max(0.0, step - 30.0) / step

    search = Search(SCRIPT, cores=16)
    tried = drive(search, model)
    workers = [s["num_workers"] for s in tried]
    # 0 -> 1 -> 2 -> 4 all better; at 4 the steps no longer wait for data (compute bound):
    # the climb stops without trying 8
    assert workers[:4] == [0, 1, 2, 4] and 8 not in workers
    assert search.best.settings["num_workers"] == 4
    assert search.best.settings["prefetch_factor"] == 4
    assert [s for s in tried[4:]] == [
        {**SCRIPT, "num_workers": 4, "persistent_workers": True},
        {**SCRIPT, "num_workers": 4, "prefetch_factor": 4}]
    assert ("pin_memory=True", "no CUDA device: pinned memory does nothing") in search.skipped
    assert len(tried) < 1 + 4 * 2 * 2 * 2  # far fewer than the grid


def test_two_rungs_without_gain_end_the_climb_and_a_failure_ends_it_at_once():
    flat = Search(SCRIPT, cores=64)
    tried = drive(flat, lambda s: (100.0, 0.5))  # nothing helps, data wait stays high
    assert [s["num_workers"] for s in tried[:3]] == [0, 1, 2]
    assert all(s["num_workers"] == 0 for s in tried[3:])  # around the (baseline) best only
    assert flat.best.settings == SCRIPT

    crash = Search(SCRIPT, cores=64)
    tried = drive(crash, lambda s: (None, None) if s["num_workers"] >= 2
                  else (100.0 / (1 + s["num_workers"]), 0.5))
    assert [s["num_workers"] for s in tried[:3]] == [0, 1, 2]
    assert crash.best.settings["num_workers"] == 1
    assert all(s["num_workers"] == 1 for s in tried[3:])


def test_no_data_wait_means_nothing_to_tune_and_cuda_adds_pin_memory():
    idle = Search(SCRIPT, cores=8)
    assert drive(idle, lambda s: (50.0, 0.01)) == [SCRIPT]
    assert idle.skipped[0] == ("more num_workers", "steps wait for data only 1% of the time")

    gpu = Search({**SCRIPT, "num_workers": 2}, cores=2, cuda=True)
    tried = drive(gpu, lambda s: (80.0 if s["pin_memory"] else 100.0, 0.3))
    assert tried[1:] == [
        {**SCRIPT, "num_workers": 2, "pin_memory": True},
        {**SCRIPT, "num_workers": 2, "pin_memory": True, "persistent_workers": True},
        {**SCRIPT, "num_workers": 2, "pin_memory": True, "prefetch_factor": 4}]
    assert gpu.best.settings["pin_memory"] is True


def test_changes_are_what_differs_from_the_script():
    script = {**SCRIPT, "num_workers": 2, "persistent_workers": True}
    assert changes_from(script, {**script, "num_workers": 0, "persistent_workers": False,
                                 "prefetch_factor": None}) == {
        "num_workers": 0, "persistent_workers": False}
    assert changes_from(script, script) == {}


def make_result(tmp_path: Path) -> TuneResult:
    trials = [
        Trial(1, "01-as-written", dict(SCRIPT), {}, status="ok", step_ms=200.0,
              data_wait_ms=150.0, peak_rss=300 << 20),
        Trial(2, "02-num_workers=2", {**SCRIPT, "num_workers": 2}, {"num_workers": 2},
              status="ok", step_ms=80.0, data_wait_ms=5.0, peak_rss=800 << 20),
        Trial(3, "03-num_workers=2_pin_memory=True", {**SCRIPT, "num_workers": 2},
              {"num_workers": 2, "pin_memory": True}, status="crashed",
              message="RuntimeError: boom (at step 0)"),
    ]
    return TuneResult(tmp_path, "/w/train.py", [], site="train.py:57",
                      passed={"num_workers": 0}, trials=trials, baseline=1, best=2)


def test_result_speedup_change_line_table_and_json_round_trip(tmp_path):
    result = make_result(tmp_path)
    assert result.speedup == pytest.approx(2.5)
    assert result.change == "train.py:57: DataLoader(..., num_workers=0) -> num_workers=2"
    lines = table(result).splitlines()
    assert lines[0].split() == ["#", "settings", "step", "data", "wait", "peak", "RSS", "status"]
    assert lines[2].startswith("2 *  num_workers=2") and "80.00 ms" in lines[2]
    assert lines[3].endswith("crashed: RuntimeError: boom (at step 0)")
    assert verdict(result)[:2] == [
        "best: num_workers=2 at 80.00 ms per step (trial 2) vs 200.00 ms as written: 2.50x "
        "faster, measured",
        "change: train.py:57: DataLoader(..., num_workers=0) -> num_workers=2"]
    path = result.save()
    from stallscope.core.tune import load_result

    again = load_result(path)
    assert again.to_json() == result.to_json()
    assert again.to_json()["best_session"] == "" and again.best_trial.changes == {
        "num_workers": 2}


def test_nothing_better_says_so(tmp_path):
    result = make_result(tmp_path)
    result.best = 1
    assert result.change == "" and result.speedup == 1.0
    assert verdict(result)[0].startswith("best: the script's own settings (num_workers=0, "
                                         "pin_memory=false, persistent_workers=false)")


def test_sizes_and_the_memory_sentence():
    assert parse_size("2G") == 2 << 30
    assert parse_size("1500M") == 1500 << 20
    assert parse_size("512MiB") == 512 << 20
    assert parse_size("1e9") == 1_000_000_000
    for bad in ("lots", "-1G", "0"):
        with pytest.raises(StallscopeError):
            parse_size(bad)
    assert over_limit_text(4, 300 << 20, 500 << 20, 1 << 30, "trial 2") == (
        "4 workers x 500.0 MiB (per worker in trial 2) + 300.0 MiB main = 2.25 GiB > 1.00 GiB "
        "available")


def test_tree_memory_samples_a_process_tree():
    """A child that holds 64 MiB and starts two sleeping workers (its own tree: the test
    process may have children of its own, e.g. a multiprocessing forkserver)."""
    import subprocess
    import sys
    import time

    import psutil

    code = ("import subprocess, sys, time\n"
            "hold = bytearray(64 << 20)\n"
            "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])"
            " for _ in range(2)]\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        root = psutil.Process(proc.pid)
        deadline = time.monotonic() + 10
        while len(root.children()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        mem = TreeMemory()
        now = mem.sample(root)
        assert mem.workers == 2
        assert mem.main >= 64 << 20                       # the child's own bytearray
        assert 0 < mem.per_worker < mem.main
        assert now >= mem.main + mem.per_worker and mem.rss >= now
    finally:
        for kid in psutil.Process(proc.pid).children():
            kid.kill()
        proc.kill()
        proc.wait()


def test_a_script_without_dataloader_has_nothing_to_tune(tmp_path):
    result = TuneResult(tmp_path, "/w/train.py", [], trials=[
        Trial(1, "01-as-written", {}, {}, status="ok", step_ms=20.0)], baseline=1, best=1,
        notes=["the script built no torch DataLoader: nothing to tune"])
    assert verdict(result) == ["note: the script built no torch DataLoader: nothing to tune"]
    assert result.change == "" and table(result).splitlines()[1].startswith("1 *  as written")
