"""`stallscope-cli tune` end to end on tiny scripts (real runner subprocesses): a crash in trial
3, Ctrl-C during a trial, a trial that would not fit in memory, a budget that runs out. Each ends
with a clear message and the finished trials kept in tune.json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from runner_helpers import write_script
from scripts import line_of, training
from tune_json import assert_one_number

from stallscope.core.tune import load_result

pytestmark = pytest.mark.runner

# Data sleeps 60 ms a step and compute 40 ms, so one worker overlaps them (100 -> 60 ms) whatever
# the machine's load, and steps still wait for data; two workers break the script.
BREAKS_AT_TWO = """
if loader.num_workers >= 2:
    raise RuntimeError("two workers break me")
"""
OVERLAP = training(items=400, item_s=0.0075, dim=4, step_s=0.04, before_loop=BREAKS_AT_TWO)
LOADER_LINE = line_of(OVERLAP, "loader = DataLoader(")

# Each worker holds 500 MiB of its own; the training process does not. Data as in OVERLAP.
HOG = """
import time, torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

HELD = []

class Hog(Dataset):
    def __len__(self):
        return 400
    def __getitem__(self, i):
        if get_worker_info() is not None and not HELD:
            HELD.append(bytearray(b"x") * (500 << 20))  # one allocation, every page touched
        time.sleep(0.0075)
        return torch.zeros(4)

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in DataLoader(Hog(), batch_size=8):
    model(x).sum().backward()
    opt.step()
    time.sleep(0.04)
"""


def tune(tmp_path: Path, script: Path, *options: str, timeout: float = 240):
    out = tmp_path / "tune"
    proc = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "tune", "--out",
                           str(out), *options, "--", str(script)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=timeout)
    return proc, out


def test_crash_in_trial_3_is_reported_and_the_search_keeps_the_rest(tmp_path):
    script = write_script(tmp_path, OVERLAP, "train.py")
    proc, out = tune(tmp_path, script, "--max-workers", "2", "--max-trials", "5")
    assert proc.returncode == 0, proc.stderr
    result = load_result(out)
    assert_one_number(json.loads((out / "tune.json").read_text()))
    # the search (1-3), then the leader and the script as written again, leader first (4-5):
    # the limit kept the last two trials for that repeat
    assert [(t.index, t.label, t.status) for t in result.trials] == [
        (1, "as written", "ok"), (2, "num_workers=1", "ok"), (3, "num_workers=2", "crashed"),
        (4, "num_workers=1", "ok"), (5, "as written", "ok")]
    assert result.trials[2].message == "RuntimeError: two workers break me (at step 0)"
    assert ("stallscope: trial 3 (num_workers=2): crashed: RuntimeError: two workers break me "
            "(at step 0)") in proc.stderr
    # one worker hides 40 of the 60 ms of data behind the 40 ms of compute, in both pairs;
    # each figure is a steady mean over at least 20 unprofiled steps
    assert result.pairs == [(1, 2), (5, 4)] and result.decision == "adopt"
    for b, lead in result.pairs:
        base, one = result.trial(b), result.trial(lead)
        assert base.step_ms > 95 and base.data_wait_ms > 55
        assert one.step_ms < 0.75 * base.step_ms and one.data_wait_ms < 0.5 * base.data_wait_ms
        assert base.steady_reached and base.steady_steps >= 20
    assert result.best == 2 and result.speedup == result.ratios[1]  # the repeated pair
    assert result.sessions == (result.trials[4].session, result.trials[3].session)
    assert result.site == f"train.py:{LOADER_LINE}"
    assert result.change == f"train.py:{LOADER_LINE}: DataLoader(..., num_workers=0) -> " \
                            "num_workers=1"
    assert f"change: {result.change}" in proc.stdout
    assert f"faster by {result.interval} (trials" in proc.stdout
    assert result.stopped == "trial limit"
    # issue 31: the leader was confirmed first; the limit then left no trial for the next
    # question, and the note names it
    assert ("stopped at the limit of 5 trials: persistent_workers=true was not tried"
            in result.notes)
    # every trial is a session folder the compare view opens; the override reached the loader
    for t in result.trials:
        session = Path(t.session)
        assert session.parent == out and (session / "events.jsonl").is_file()
    one = result.trials[1]
    assert one.effective["num_workers"] == 1
    events = [json.loads(line) for line in
              (Path(one.session) / "events.jsonl").read_text().splitlines()]
    built = [e for e in events if e["event"] == "dataloader"]
    assert built[0]["overridden"] == {"num_workers": {"from": 0, "to": 1}}
    # the tune folder alone compares the two sessions of the claim, with the same speed-up
    cmp = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "compare", str(out),
                          "--json"], capture_output=True, text=True, timeout=120)
    assert cmp.returncode == 0, cmp.stderr
    pair = json.loads(cmp.stdout)
    assert (pair["before"], pair["after"]) == result.sessions
    assert pair["speedup"] == pytest.approx(result.speedup, rel=1e-9)
    metrics = {m["key"]: m for m in pair["metrics"]}
    assert metrics["data_wait_ms"]["after"] < metrics["data_wait_ms"]["before"]
    assert metrics["step_ms"]["verdict"] == "better"


def test_ctrl_c_during_a_trial_keeps_the_finished_ones(tmp_path):
    # Trial 2 (num_workers=1) marks that it is inside its second step and then waits there,
    # so the signal lands at a known point whatever the machine's load.
    mark = tmp_path / "trial-2-in-a-step"
    body = training(items=400, item_s=0.0075, dim=4, before_loop=BREAKS_AT_TWO, in_step=f"""
        time.sleep(0.3)
        if loader.num_workers == 1:  # trial 2: one step done
            open({str(mark)!r}, 'a').close()
            time.sleep(600)
    """)
    script = write_script(tmp_path, body, "train.py")
    out = tmp_path / "tune"
    proc = subprocess.Popen([sys.executable, "-m", "stallscope.core.cli", "tune", "--out",
                             str(out), "--max-workers", "2", "--", str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    try:
        deadline = time.monotonic() + 180
        while not mark.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "trial 2 never reached its step"
            time.sleep(0.1)
        second = out / "02-num_workers=1"
        runner_pid = json.loads((second / "run.json").read_text())["pid"]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert f"stallscope: interrupted: 1 finished trial kept in {out} (tune.json)" in err
    result = load_result(out)
    assert_one_number(json.loads((out / "tune.json").read_text()))
    assert result.stopped == "interrupted"
    assert [(t.index, t.status) for t in result.trials] == [(1, "ok"), (2, "interrupted")]
    assert result.trials[0].step_ms > 300
    assert not psutil.pid_exists(runner_pid) or psutil.Process(runner_pid).status() == "zombie"
    last = json.loads((second / "events.jsonl").read_text().splitlines()[-1])
    assert last["event"] == "finished" and last["rc"] != 0


def test_a_trial_that_would_not_fit_in_memory_is_skipped(tmp_path):
    script = write_script(tmp_path, HOG, "train.py")
    proc, out = tune(tmp_path, script, "--max-workers", "2", "--max-trials", "5",
                     "--memory-limit", "1100M")
    assert proc.returncode == 0, proc.stderr
    result = load_result(out)
    assert_one_number(json.loads((out / "tune.json").read_text()))
    # the search, then the leader repeated against the script as written (trials 4 and 5)
    assert [(t.label, t.status) for t in result.trials] == [
        ("as written", "ok"), ("num_workers=1", "ok"), ("num_workers=2", "skipped"),
        ("num_workers=1", "ok"), ("as written", "ok")]
    one = result.trials[1]
    assert 500 << 20 <= one.worker_private < 700 << 20  # the worker's own 500 MiB
    message = result.trials[2].message
    assert message.startswith("would run out of memory: 2 workers x ")
    assert "(per worker in trial 2)" in message and message.endswith("> 1.07 GiB available")
    assert not Path(result.trials[2].session or out / "03-x").exists()  # never launched
    assert f"trial 3 (num_workers=2): skipped: {message}" in proc.stderr


def test_a_budget_that_runs_out_stops_the_trial_and_says_so(tmp_path):
    script = write_script(tmp_path, training(items=400, item_s=0.0075, dim=4, step_s=0.5,
                                            before_loop=BREAKS_AT_TWO),
                          "train.py")
    proc, out = tune(tmp_path, script, "--budget", "6")
    result = load_result(out)
    assert_one_number(json.loads((out / "tune.json").read_text()))
    assert result.stopped == "budget"
    over = [t for t in result.trials if t.status == "over budget"]
    assert len(over) == 1 and over[0].message == "the time budget ran out during it"
    assert "the time budget (6 s) ran out during trial" in proc.stdout
    assert result.elapsed_s < 20
    fin = json.loads((Path(over[0].session) / "events.jsonl").read_text().splitlines()[-1])
    assert fin["event"] == "finished"
    assert os.path.isdir(over[0].session)
