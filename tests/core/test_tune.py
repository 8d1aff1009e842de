"""The tune search, its result and its figures, without processes (the runs are in
test_tune_runs.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stallscope.core.errors import StallscopeError
from stallscope.core.tune import Search, Trial, TuneResult, ladder, noise, table, verdict
from stallscope.core.tune.memory import TreeMemory, over_limit_text, parse_size
from stallscope.core.tune.search import SECONDARY_GAIN
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
    # data costs 120 ms per batch over the workers, compute 30 ms; prefetch 4 wins 10% while
    # the steps still wait for data
    def model(s, data_ms=120.0):
        data = data_ms / max(s["num_workers"], 1) if s["num_workers"] else data_ms
        step = max(data, 30.0) if s["num_workers"] else data + 30.0
        if s.get("prefetch_factor") == 4 and step > 30.0:
            step = max(30.0, step * 0.9)
        return step, max(0.0, step - 30.0) / step

    search = Search(SCRIPT, cores=16)
    tried = drive(search, model)
    workers = [s["num_workers"] for s in tried]
    # 0 -> 1 -> 2 -> 4 all better; at 4 the steps no longer wait for data (compute bound):
    # the climb stops without trying 8, and no setting around it can help steps that do not
    # wait for data (issue 21: the around stage is skipped, which saves two trials)
    assert workers == [0, 1, 2, 4]
    assert search.best.settings == {**SCRIPT, "num_workers": 4}
    assert ("pin_memory, persistent_workers, prefetch_factor",
            "steps wait for data only 0% of the time") in search.skipped

    # on 2 cores with workers on a CPU (the data takes turns on 2 cores) the climb tries one
    # rung past the cores (issue 31: 4 beat 2 on 2 cores by 12.9% once), here no faster, then
    # the settings around the best, steps still waiting: prefetch 4 kept
    def on_two_cores(s):
        return model({**s, "num_workers": min(s["num_workers"], 2)})

    search = Search(SCRIPT, cores=2)
    tried = []
    while (settings := search.next()) is not None:
        tried.append(settings)
        search.record(settings, *on_two_cores(settings), worker_cpu=0.95)
    assert [s["num_workers"] for s in tried[:4]] == [0, 1, 2, 4]
    assert tried[4:] == [
        {**SCRIPT, "num_workers": 2, "persistent_workers": True},
        {**SCRIPT, "num_workers": 2, "prefetch_factor": 4}]
    assert search.best.settings == {**SCRIPT, "num_workers": 2, "prefetch_factor": 4}
    assert search.climb_note() == ("workers are on a CPU 95% of the time they could run "
                                   "(CPU-bound): tried one rung past the 2 cores; tried up "
                                   "to 4")
    assert ("pin_memory=True", "no CUDA device: pinned memory does nothing") in search.skipped
    assert len(tried) < 1 + 4 * 2 * 2 * 2  # far fewer than the grid


def test_short_epochs_climb_with_workers_kept_across_epochs():
    short = Search(SCRIPT, cores=2, epoch_steps=8.0)
    assert short.next() == SCRIPT
    short.record(SCRIPT, 100.0, 0.6)
    assert short.next() == {**SCRIPT, "num_workers": 1, "persistent_workers": True}
    long = Search(SCRIPT, cores=2)
    long.next()
    long.record(SCRIPT, 100.0, 0.6)
    assert long.next() == {**SCRIPT, "num_workers": 1}


def test_a_setting_beside_num_workers_is_always_checked_against_the_noise():
    # issue 21: two tunes kept 8 workers and 8 workers + persistent_workers; a rung may win
    # on one trial when it wins by far, a setting beside num_workers never does
    search = Search(SCRIPT, cores=2)
    search.record(search.next(), 100.0, 0.8)
    assert search.duel_pairs(None) is None
    assert search.duel_pairs(97.0) is None                       # not better: no duel
    assert search.duel_pairs(90.0) == noise.SMALL_GAIN_PAIRS     # a small gain of a rung
    assert search.duel_pairs(50.0) is None                       # a rung winning by far
    search.record(search.next(), 50.0, 0.6, worker_cpu=0.9)      # 1 worker
    search.record(search.next(), 26.0, 0.3, worker_cpu=0.9)      # 2: the cores, CPU-bound
    assert search.next()["num_workers"] == 4                     # one rung past the cores,
    search.record(search.next(), 26.0, 0.3, worker_cpu=0.9)      # no faster
    assert search.next() == {**SCRIPT, "num_workers": 2, "persistent_workers": True}
    assert search.stage == "around"
    # beside num_workers the bar is SECONDARY_GAIN: inside it a setting is not even tried again
    assert search.bar == SECONDARY_GAIN == 0.1
    assert search.duel_pairs(25.5) is None and search.duel_pairs(24.0) is None  # 8% only
    assert not search.record(search.next(), 24.0, 0.3)           # nor kept on one trial
    assert search.duel_pairs(23.0) == noise.MIN_PAIRS            # 13%: the verdict's rule,
    assert search.duel_pairs(10.0) == noise.MIN_PAIRS            # even a large gain is repeated
    # the duel's pairs decide as the verdict does, each beyond the bar: two obvious pairs,
    # else three (two tunes kept prefetch_factor=4 at 1.06-1.12x over 3 pairs, or not)
    assert noise.decide([1.4, 1.35], 0.1, 3, noise.MIN_PAIRS, 0.3) == noise.ADOPT
    assert noise.decide([1.4, 1.15], 0.1, 3, noise.MIN_PAIRS, 0.3) == noise.MORE
    assert noise.decide([1.4, 1.15, 1.12], 0.1, 3, noise.MIN_PAIRS, 0.3) == noise.ADOPT
    assert noise.decide([1.07, 1.06, 1.12], 0.1, 3, noise.MIN_PAIRS, 0.3) == noise.NOISE


def test_a_busy_machine_is_named_beside_the_figures(tmp_path):
    from stallscope.core.tune.job import load_note

    assert load_note([], 2) == "" and load_note([0.4, 1.0], 2) == ""
    # a CPU-bound trial's own main + 2 workers on 2 cores load it to about 3: not other work
    assert load_note([1.2, 3.0, 4.9], 2) == ""
    assert load_note([0.7, 6.26, 3.1], 2) == (
        "other work kept the machine busy during the trials (load average up to 6.3 on 2 "
        "cores): the figures hold for that load")
    assert load_note([12.0], 8) == ""
    # said beside the statistic, kept in tune.json
    from stallscope.core.tune import load_result

    result = paired(tmp_path, [2.5, 2.9, 2.7], noise.ADOPT)
    result.busy = load_note([6.26], 2)
    lines = verdict(result)
    assert lines[2].startswith("step times: ") and lines[3] == f"note: {result.busy}"
    assert load_result(result.save()).busy == result.busy


def test_a_duel_rebases_the_best_on_the_median_of_its_repeats():
    search = Search(SCRIPT, cores=4)
    search.record(search.next(), 100.0, 0.6)
    one = search.next()
    search.rebase(80.0, True)          # the duel kept it: the median of its repeats counts
    assert search.record(one, 90.0, 0.5, better=True) and search.best.step_ms == 80.0
    two = search.next()
    search.rebase(70.0, False)         # the duel did not: the best measured again
    assert not search.record(two, 75.0, 0.4, better=False)
    assert search.best.settings == one and search.best.step_ms == 70.0


def test_workers_that_wait_on_io_climb_past_the_cores_up_to_the_limit():
    # every batch sleeps 400 ms in a worker (off the CPU), compute 10 ms: more workers help
    # until 32 of them, far past 2 cores
    def io(s):
        w = s["num_workers"]
        step = max(400.0 / w, 10.0) if w else 410.0
        return step, max(0.0, step - 10.0) / step, (0.03 if w else None)

    def drive_io(search):
        tried = []
        while (settings := search.next()) is not None:
            tried.append(settings["num_workers"])
            search.record(settings, *io(settings))
        return tried

    search = Search(SCRIPT, cores=2, most=16)
    assert drive_io(search)[:6] == [0, 1, 2, 4, 8, 16]
    assert search.best.settings["num_workers"] == 16
    assert search.climb_note() == (
        "workers wait on I/O 97% of the time and steps still wait for data 95% of theirs: "
        "tried past the 2 cores; tried up to 16 (the limit)")
    # the user's limit (or the cores when it is unset) holds
    capped = Search(SCRIPT, cores=2, most=4)
    assert max(drive_io(capped)) == 4
    assert capped.climb_note().endswith("tried past the 2 cores; tried up to 4 (the limit)")
    at_cores = Search(SCRIPT, cores=2, most=2)
    assert max(drive_io(at_cores)) == 2
    assert at_cores.climb_note() == ("workers wait on I/O 97% of the time, but the limit is 2 "
                                     "workers")
    # past the cores one rung without gain ends the climb: 8 and 16 no better than 4
    flat = Search(SCRIPT, cores=2, most=64)
    tried = []
    while (settings := flat.next()) is not None:
        tried.append(settings["num_workers"])
        step, share, cpu = io(settings)
        flat.record(settings, max(step, 100.0), share, cpu)
    assert tried[:5] == [0, 1, 2, 4, 8] and 16 not in tried  # 4 better, 8 not: no 16
    assert flat.best.settings["num_workers"] == 4


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


def confirm(result: TuneResult) -> TuneResult:
    """The search's leader (trial 2) confirmed by its pair against the script as written."""
    result.leader, result.pairs, result.decision = 2, [(1, 2)], noise.ADOPT
    return result


def test_a_framework_built_loader_names_the_setting_to_change(tmp_path):
    """HF Trainer builds the DataLoader from TrainingArguments: tune names that setting at the
    user's line (the runner records it in run.json's `dataloaders`), and keeps it in tune.json."""
    result = confirm(make_result(tmp_path))
    result.site = "hf_trainer.py:30"
    result.settings = {"owner": "TrainingArguments",
                       "names": {"num_workers": "dataloader_num_workers"}}
    assert result.change == ("hf_trainer.py:30: TrainingArguments(dataloader_num_workers=0) "
                             "-> dataloader_num_workers=2")
    again = TuneResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again.change == result.change


def test_result_speedup_change_line_table_and_json_round_trip(tmp_path):
    # the search's best before its pairs: a leader, not a result (issue 31)
    result = make_result(tmp_path)
    assert result.speedup is None and result.change == "" and not result.confirmed
    assert result.leader_speedup == pytest.approx(2.5) and result.outcome == "not confirmed"
    result = confirm(result)
    assert result.speedup == pytest.approx(2.5)
    assert result.change == "train.py:57: DataLoader(..., num_workers=0) -> num_workers=2"
    lines = table(result).splitlines()
    assert lines[0].split() == ["#", "settings", "step", "data", "wait", "peak", "RSS", "status"]
    assert lines[2].startswith("2 *  num_workers=2") and "80.00 ms" in lines[2]
    assert lines[3].endswith("crashed: RuntimeError: boom (at step 0)")
    assert verdict(result)[:3] == [
        "best: num_workers=2 at 80.00 ms per step vs 200.00 ms as written: faster by 2.50x "
        "over 1 pair (not repeated) (trials 1 and 2)",
        "change: train.py:57: DataLoader(..., num_workers=0) -> num_workers=2",
        "step times: steady mean (elapsed over the steady steps / their count), on unprofiled "
        "steps"]
    path = result.save()
    from stallscope.core.tune import load_result

    again = load_result(path)
    assert again.to_json() == result.to_json()
    assert again.to_json()["best_session"] == "" and again.best_trial.changes == {
        "num_workers": 2}


def paired(tmp_path: Path, ratios: list[float], decision: str) -> TuneResult:
    """A result whose leader (num_workers=2 at 80 ms) was repeated against the script as
    written: pair i's as-written trial measured 80 x ratios[i]."""
    result = make_result(tmp_path)
    result.trials[0].step_ms = 80.0 * ratios[0]
    result.leader, result.pairs, result.decision = 2, [(1, 2)], decision
    for r in ratios[1:]:
        n = len(result.trials)
        result.trials += [
            Trial(n + 1, f"{n + 1:02d}-num_workers=2-pair", {**SCRIPT, "num_workers": 2},
                  {"num_workers": 2}, session=f"s{n + 1}", status="ok", step_ms=80.0),
            Trial(n + 2, f"{n + 2:02d}-as-written-pair", dict(SCRIPT), {},
                  session=f"s{n + 2}", status="ok", step_ms=80.0 * r)]
        result.pairs.append((n + 2, n + 1))
    result.best = 2 if decision == noise.ADOPT else 1
    return result


def test_a_verdict_prints_its_interval_and_names_the_median_pair(tmp_path):
    result = paired(tmp_path, [2.5, 2.9, 2.7], noise.ADOPT)
    assert result.ratios == pytest.approx([2.5, 2.9, 2.7])
    assert result.speedup == pytest.approx(2.7)
    assert result.sessions == ("s7", "s6")  # the pair whose ratio is the claim
    assert verdict(result)[0] == ("best: num_workers=2 at 80.00 ms per step vs 216.00 ms as "
                                  "written: faster by 2.70x, 2.50-2.90x over 3 pairs "
                                  "(trials 7 and 6)")
    data = result.to_json()
    assert (data["baseline_session"], data["best_session"]) == ("s7", "s6")
    # the claim is the median of the repeated (back-to-back, traced) pairs; the interval
    # covers the search's own pair too
    apart = paired(tmp_path, [3.1, 2.5, 2.7], noise.ADOPT)
    assert apart.speedup == pytest.approx(2.5) and apart.sessions == ("s5", "s4")
    assert apart.interval == "2.50x, 2.50-3.10x over 3 pairs"
    assert data["interval"] == "2.70x, 2.50-2.90x over 3 pairs" and data["decision"] == "adopt"
    from stallscope.core.tune import load_result

    assert load_result(result.save()).to_json() == data


def test_a_pair_without_figures_is_left_out_of_the_claim_not_shifted_into_it(tmp_path):
    # a pair whose trials are gone (or never measured) sits between the search's pair and
    # the repeats: the claim is still the median repeat's own two trials
    result = paired(tmp_path, [2.5, 2.9, 2.7], noise.ADOPT)
    result.pairs.insert(1, (99, 98))
    result.trials.append(Trial(98, "98-num_workers=2-pair", {**SCRIPT, "num_workers": 2},
                               {"num_workers": 2}, session="s98", status="crashed"))
    assert result.ratios == pytest.approx([2.5, 2.9, 2.7])
    assert result.speedup == pytest.approx(2.7)
    assert result.sessions == ("s7", "s6")
    assert result.interval == "2.70x, 2.50-2.90x over 3 pairs"
    # only the search's pair measured: it is the claim
    alone = paired(tmp_path, [2.5], noise.UNCONFIRMED)
    alone.pairs.append((99, 98))
    assert alone.leader_speedup == pytest.approx(2.5) and alone.claim_pair is not None
    assert alone.speedup is None  # not confirmed: no speed-up where a reader looks
    assert [t.index for t in alone.claim_pair] == [1, 2]


def test_a_leader_within_noise_keeps_the_script_settings(tmp_path):
    result = paired(tmp_path, [1.12, 0.97, 1.04], noise.NOISE)
    lines = verdict(result)
    # issue 31: the verdict first, the leader under its own name
    assert lines[:2] == [
        "keep your settings (num_workers=0, pin_memory=false, persistent_workers=false): "
        "nothing measured faster beyond the noise",
        "leader, within noise, not kept: num_workers=2 measured 0.97x, 0.97-1.12x over 3 "
        "pairs against the script as written"]
    assert result.change == "" and not any(line.startswith("change:") for line in lines)


def test_noise_decides_on_the_interval_of_the_pairs():
    gain = 0.05
    assert noise.decide([3.0], gain) == noise.MORE            # one pair proves nothing
    assert noise.decide([3.0, 2.8], gain) == noise.ADOPT      # every pair beyond the gain
    assert noise.decide([1.2, 1.01], gain) == noise.MORE      # straddles: one more pair
    assert noise.decide([1.2, 1.01, 1.1], gain) == noise.NOISE  # still straddles at the last
    assert noise.decide([1.04, 0.98], gain) == noise.NOISE    # no pair beyond the gain
    # a pair under the obvious gain asks for a third (a CPU-bound bench read 2.11x then 1.13x)
    assert noise.decide([2.11, 1.13], gain, obvious=0.3) == noise.MORE
    assert noise.decide([2.11, 1.13, 1.2], gain, obvious=0.3) == noise.ADOPT
    assert noise.decide([2.11, 1.13, 0.9], gain, obvious=0.3) == noise.NOISE
    assert noise.decide([3.0, 2.8], gain, obvious=0.3) == noise.ADOPT
    assert noise.median_index([2.5, 2.9, 2.7]) == 2
    assert noise.median_index([1.2, 1.1]) == 1                # the lower middle one
    assert noise.interval_text([1.3]) == "1.30x over 1 pair (not repeated)"


def test_nothing_better_says_so(tmp_path):
    result = make_result(tmp_path)
    result.best = 1
    # no gain confirmed: no speed-up at all (it was 1.0; issue 31 keeps `speedup` for a
    # confirmed gain only)
    assert result.change == "" and result.speedup is None and result.outcome == "no gain"
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


@pytest.mark.runner
def test_worker_cpu_tells_computing_workers_from_sleeping_ones():
    """Two real children: one busy-loops (on a CPU, or waiting for one on a loaded machine),
    one sleeps (as on I/O). Their share of wall time wanting a CPU tells them apart."""
    import subprocess
    import sys
    import time

    import psutil

    from stallscope.core.tune.cpu import WorkerCpu

    code = {"busy": "import time\nt = time.time()\nwhile time.time() - t < 3: pass",
            "sleep": "import time; time.sleep(3)"}
    kids = {k: subprocess.Popen([sys.executable, "-c", c]) for k, c in code.items()}
    try:
        time.sleep(0.5)  # past the interpreter's start-up
        shares = {}
        for name, kid in kids.items():
            cpu = WorkerCpu()
            procs = [psutil.Process(), psutil.Process(kid.pid)]
            cpu.sample(procs, time.time())
            time.sleep(1.0)
            cpu.sample(procs, time.time())
            shares[name] = cpu.share()
    finally:
        for kid in kids.values():
            kid.kill()
            kid.wait()
    assert shares["busy"] > 0.8 and shares["sleep"] < 0.1, shares


@pytest.mark.runner
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
