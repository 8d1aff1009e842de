"""The whole-run record: real scripts under the runner (epoch starts, saves, validation, kills),
the bounded file fed a long run in-process, and repeated profiling windows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from runner_helpers import RUNNER, events, finished, run, trace_events, write_script
from scripts import line_of, training

from stallscope.core import cli
from stallscope.core.capture import record as fmt
from stallscope.core.capture.record import RunRecord
from stallscope.core.session.reader import EventFollower, open_session
from stallscope.core.session.record import load_record, read_record
from stallscope.core.session.stalls import analyze_run

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess), DataLoader workers

# Five short epochs; each worker sleeps 0.3 s as it starts (a known start-up cost), so with
# persistent_workers=False every epoch waits ~0.3 s for its first batch.
EPOCHS = training(
    items=32, epochs=5,
    loader="num_workers=2, worker_init_fn=slow_start, persistent_workers=False",
    head="""
        def slow_start(worker_id):
            time.sleep(0.3)
    """,
    before_loop="val = DataLoader(Slow(), batch_size=8)",
    after_epoch="""
        with torch.no_grad():
            for x, y in val:
                model(x)
                time.sleep(0.03)
        torch.save(model.state_dict(), "ckpt.pt")
    """)
LOADER_LINE = line_of(EPOCHS, "loader = DataLoader(")
VAL_LINE = line_of(EPOCHS, "val = DataLoader(")


def stall(run_report, stall_id):
    return next((s for s in run_report.stalls if s.id == stall_id), None)


def cli_out(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_epoch_start_pauses_named_then_gone_with_persistent_workers(tmp_path, capsys):
    script = write_script(tmp_path, EPOCHS)
    proc, session = run(tmp_path, script, "--no-stop-after-window")
    assert proc.returncode == 0, proc.stderr
    rec = load_record(open_session(session))
    assert rec.n_steps == 20 == finished(session)["steps"]
    epochs = [e for e in rec.epochs if e["site"].endswith(f":{LOADER_LINE}")]  # the training loader
    assert len(epochs) == 5 and all(e["first_batch_ms"] > 280 for e in epochs)
    report = analyze_run(rec)
    pause = stall(report, "epoch_start")
    assert pause is not None and report.stalls[0] is pause
    assert "while 2 workers start: persistent_workers=True saves" in pause.title
    assert "x 4 epochs" in pause.title
    assert 4 * 0.25 < pause.saving_s < 4 * 1.5
    val = stall(report, "validation")
    assert val is not None and 5 * 4 * 0.03 <= val.cost_s < 5.0  # 20 batches of 30 ms
    assert f"DataLoader script.py:{VAL_LINE}" in val.evidence
    assert report.saves == 5 and [e["n"] for e in rec.saves] == [4, 8, 12, 16, 20]

    rc, text, _ = cli_out(capsys, "analyze", str(session))
    assert rc == 0 and pause.title in text and "whole run  20 steps" in text
    rc, out, _ = cli_out(capsys, "analyze", str(session), "--json")
    section = json.loads(out)["run"]
    assert section["steps"] == 20
    assert section["stalls"][0]["id"] == "epoch_start"
    assert section["stalls"][0]["saving_s"] == pytest.approx(pause.saving_s)

    tuned_dir = tmp_path / "tuned"
    tuned_dir.mkdir()
    proc, session = run(tuned_dir, script, "--no-stop-after-window",
                        "--set", "persistent_workers=true")
    assert proc.returncode == 0, proc.stderr
    tuned = analyze_run(load_record(open_session(session)))
    assert stall(tuned, "epoch_start") is None
    later = [e["first_batch_ms"] for e in load_record(open_session(session)).epochs
             if e["site"].endswith(f":{LOADER_LINE}")][1:]
    assert len(later) == 4 and max(later) < 250


# Validation between epochs: 4 batches whose items sleep 50 ms each (>= 200 ms a pass), fetched
# between two optimizer steps (the pass after the last epoch follows the last step).
TRAIN_AND_VAL = training(
    items=16, epochs=2,
    head="""
        class Val(Dataset):
            def __len__(self):
                return 4
            def __getitem__(self, i):
                time.sleep(0.05)
                return torch.randn(8), torch.randn(1)
    """,
    before_loop="val = DataLoader(Val(), batch_size=1)",
    after_epoch="""
        with torch.no_grad():
            for x, y in val:
                model(x)
    """)


def test_validation_fetches_are_validation_not_the_next_steps_data_wait(tmp_path):
    script = write_script(tmp_path, TRAIN_AND_VAL)
    proc, session = run(tmp_path, script, "--no-stop-after-window")
    assert proc.returncode == 0, proc.stderr
    steps = events(session, "step")
    assert len(steps) == 4
    # step 2 follows the first validation pass: its one training batch, not the 4 val ones,
    # and not their >= 200 ms of fetching
    assert [s["batches"] for s in steps] == [1, 1, 1, 1]
    assert steps[2]["data_wait_ms"] < 200
    rec = load_record(open_session(session))
    assert list(rec.steps["batches"]) == [1, 1, 1, 1]
    assert float(rec.steps["data_wait_ms"][2]) == pytest.approx(steps[2]["data_wait_ms"],
                                                                abs=1e-3)
    val = stall(analyze_run(rec), "validation")  # the same seconds, counted here once
    assert val is not None and val.cost_s >= 2 * 0.2
    assert f"DataLoader script.py:{line_of(TRAIN_AND_VAL, 'val = DataLoader(')}" in val.evidence


def test_a_batch_from_each_of_two_loaders_a_step_is_all_the_steps_data(tmp_path):
    # zip(A, B): as many batches of A as of B each step; A's fetches came before the step's
    # last loader's, and were taken for validation: out of the data wait, a stall of their own
    script = write_script(tmp_path, """
import time, torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        time.sleep(0.03)
        return torch.randn(8)

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
labelled = DataLoader(Slow(), batch_size=1)
unlabelled = DataLoader(Slow(), batch_size=1)
for a, b in zip(labelled, unlabelled):
    loss = model(a + b).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
""")
    proc, session = run(tmp_path, script, "--no-stop-after-window")
    assert proc.returncode == 0, proc.stderr
    steps = events(session, "step")
    assert len(steps) == 8 and [s["batches"] for s in steps] == [2] * 8
    assert all(s["data_wait_ms"] >= 2 * 30 for s in steps), steps  # both fetches, each step
    rec = load_record(open_session(session))
    assert stall(analyze_run(rec), "validation") is None
    # labelled's fetches are the step's data, not "time between steps, outside DataLoaders"
    # (they were: 30 ms in each step after the first, counted twice)
    between = stall(analyze_run(rec), "between_steps")
    assert between is None or between.cost_s < 7 * 0.03 / 2, between


def test_stepping_per_batch_another_loaders_batches_are_steps_not_validation(tmp_path):
    script = write_script(tmp_path, """
import time, torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        time.sleep(0.01)
        return torch.randn(8)

train = DataLoader(Slow(), batch_size=2)
val = DataLoader(Slow(), batch_size=4)
for epoch in range(2):
    for x in train:
        x.sum()
    for x in val:
        x.sum()
""")
    proc, session = run(tmp_path, script, "--no-stop-after-window")
    assert proc.returncode == 0, proc.stderr
    fin = finished(session)
    assert fin["stepping"] == "batch" and fin["steps"] == 2 * (4 + 2)
    rec = load_record(open_session(session))
    assert (rec.steps["loader"] == 1).sum() == 4  # val's batches: steps of their own
    # their fetches are those steps' data wait: not listed again as validation
    assert stall(analyze_run(rec), "validation") is None


def test_record_keeps_every_step_of_a_killed_run(tmp_path):
    script = write_script(tmp_path, training(forever=True))
    session = tmp_path / "session"
    proc = subprocess.Popen([sys.executable, str(RUNNER), "--session", str(session),
                             "--no-stop-after-window", "--", str(script)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    follower, deadline, seen = EventFollower(session), time.monotonic() + 60, 0
    while seen < 200 and time.monotonic() < deadline:
        seen += sum(e["event"] == "step" for e in follower.poll())
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    steps = events(session, "step")
    assert len(steps) >= 200
    rec = read_record(session / "record.bin")
    # the record's row is written before the step's events line: it holds at least as many
    assert rec.n_steps >= len(steps)
    assert list(rec.steps["n"][: len(steps)]) == [s["n"] for s in steps]
    # the record keeps each step's time whole; a line rounds it to the µs
    np.testing.assert_allclose(rec.steps["wall_ms"][: len(steps)],
                               [s["wall_ms"] for s in steps], rtol=1e-5, atol=5e-4 + 1e-9)


def test_a_long_run_folds_into_blocks_and_stays_small(tmp_path):
    path = tmp_path / "record.bin"
    rec = RunRecord(path)
    rng = np.random.default_rng(0)
    n = 3 * fmt.RECENT_MAX + 1234
    wall = rng.uniform(5, 15, n).round(3)
    wall[fmt.BLOCK + 7] = 900.0  # one slow step in the oldest (folded) part
    for i in range(n):
        rec.step({"wall_ms": float(wall[i]), "data_wait_ms": 1.0, "batches": 1,
                  "phase": "wait", "rss": 100 << 20})
    rec.close()
    back = read_record(path)
    assert back.n_steps == n
    assert path.stat().st_size < fmt.HEADER_SIZE + fmt.RECENT_MAX * fmt.STEP.size \
        + (n // fmt.BLOCK + 1) * fmt.BLOCK_ROW.size
    folded = int(back.blocks["count"].sum())
    assert folded % fmt.BLOCK == 0 and folded >= 2 * fmt.RECENT_MAX - fmt.RECENT_MAX // 2
    assert back.first_full == folded and back.steps["n"][-1] == n - 1
    assert back.total("wall_ms") == pytest.approx(wall.sum(), rel=1e-6)
    assert back.total("data_wait_ms") == pytest.approx(float(n), rel=1e-6)
    assert back.blocks["wall_max"][1] == pytest.approx(900.0)
    assert back.blocks["wall_max_n"][1] == fmt.BLOCK + 7
    np.testing.assert_allclose(back.blocks["wall_median"][0], np.median(wall[:fmt.BLOCK]),
                               rtol=1e-5)
    view = back.overview(500)
    assert len(view["x"]) <= 500 and view["wall_max"].max() == pytest.approx(900.0)


# Four epochs of 10 steps, a validation pass after each, and one before training.
VALIDATED = training(
    items=80, epochs=4,
    head="from torch.utils.data import TensorDataset",
    before_loop="""
        val = DataLoader(TensorDataset(torch.randn(16, 8), torch.randn(16, 1)), batch_size=8)
        for x, y in val:  # a sanity check before training, as Lightning does: not an epoch
            model(x)
    """,
    after_epoch="""
        for x, y in val:
            model(x)
    """)


def test_profile_every_records_one_trace_per_window(tmp_path):
    script = write_script(tmp_path, VALIDATED)
    for options, windows in ((("--profile-every", "10"), [[2, 3], [12, 13], [22, 23], [32, 33]]),
                             (("--profile-at", "5,30"), [[5, 6], [30, 31]]),
                             (("--profile-epochs",), [[2, 3], [12, 13], [22, 23], [32, 33]])):
        proc, session = run(tmp_path, script, *options, "--active", "2", "--warmup", "1")
        assert proc.returncode == 0, proc.stderr
        assert finished(session)["steps"] == 40  # the run went on to its end
        ready = events(session, "trace_ready")
        assert [e["window"] for e in ready] == windows, options
        for e in ready:
            names = sorted(x["name"] for x in trace_events(session / e["path"])
                           if x.get("name", "").startswith("ProfilerStep#"))
            lo, hi = e["window"]
            assert names == sorted(f"ProfilerStep#{k}" for k in range(lo, hi + 1))
        rec = load_record(open_session(session))
        assert [[w.first, w.last] for w in rec.windows] == windows
        assert [e["phase"] for e in events(session, "step")] == phases(windows, 40), options
        assert int((rec.steps["flags"] & fmt.PROFILED).astype(bool).sum()) == 2 * len(windows)
        for path in session.parent.glob("session"):
            subprocess.run(["rm", "-rf", str(path)], check=True)


def phases(windows: list[list[int]], steps: int, warmup: int = 1) -> list[str]:
    """What each step event says of the profiler: waiting for the first window, warming up,
    recording, or between windows."""
    def phase(n: int) -> str:
        if any(lo <= n <= hi for lo, hi in windows):
            return "active"
        if any(lo - warmup <= n < lo for lo, _ in windows):
            return "warmup"
        return "between" if n > windows[0][1] else "wait"
    return [phase(n) for n in range(steps)]


def test_profile_options_refused_before_anything_runs(tmp_path):
    script = write_script(tmp_path, "print('never')\n")
    for options, message in ((("--profile-at", "5,x"), "expected step numbers"),
                             (("--profile-every", "3"), "need more steps apart")):
        proc, session = run(tmp_path, script, *options)
        assert proc.returncode == 2 and message in proc.stderr
        assert not session.exists()


def test_events_thin_out_after_many_steps_but_the_record_keeps_all(tmp_path, monkeypatch):
    from stallscope.core.capture import writer

    clock = [0.0]  # the writer's clock: each step takes 1 ms
    monkeypatch.setattr(writer.time, "perf_counter", lambda: clock[0])
    log = writer.EventLog(tmp_path / "events.jsonl", None)
    log.record = RunRecord(tmp_path / "record.bin")
    full = writer.FULL_STEPS
    n = full + 3 * 50 + 5
    for i in range(n):
        clock[0] += 0.001
        phase = "active" if i == full + 120 else "wait"
        log.emit("step", n=i, wall_ms=1.0, data_wait_ms=0.5, phase=phase)
    log.close()
    kept = [e["n"] for e in events(tmp_path, "step")]
    assert kept[:full] == list(range(full))
    # after the first steps, one line a SLICE_S (50 steps here), then every step of a
    # profiled window and of the FULL_STEPS after it (all the rest here)
    sliced = [k for k in kept if k < full + 120]
    assert len(sliced) == full + 2 and {*np.diff(sliced[full - 1:])} <= {50, 51}
    assert kept[full + 2:] == list(range(full + 120, n))
    assert read_record(tmp_path / "record.bin").n_steps == n


def test_sessions_go_to_the_user_data_folder(tmp_path, monkeypatch):
    from stallscope.core.capture.options import default_session_dir, sessions_root

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert sessions_root() == tmp_path / "xdg" / "stallscope" / "sessions"
    assert default_session_dir("/some/where/train.py").parent == sessions_root()
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")  # the spec: absolute paths only
    assert sessions_root() == Path.home() / ".local" / "share" / "stallscope" / "sessions"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert sessions_root() == Path.home() / ".local" / "share" / "stallscope" / "sessions"


def test_a_hostile_session_record_reads_as_one_line_or_typed_events(tmp_path, capsys):
    session = tmp_path / "s"
    session.mkdir()
    (session / "run.json").write_text("{}")
    rec = RunRecord(session / "record.bin")
    for _ in range(5):
        rec.step({"wall_ms": 10.0, "data_wait_ms": 1.0})
    rec.close()
    bad = [{"event": "epoch", "loader": 0, "n": "x", "first_batch_ms": "lots", "workers": "8",
            "site": "<img src='file:/dev/zero'>\x1b[2J"},
           {"event": "save", "n": 3, "ms": float("nan")},
           {"event": "trace_ready", "path": "traces/x", "window": ["a", 2]}]
    (session / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in bad))
    got = load_record(open_session(session))
    assert got.epochs == [{"loader": 0, "site": "<img src='file:/dev/zero'>\x1b[2J"}]
    assert got.saves == [{"n": 3}] and got.windows == []
    analyze_run(got)  # no TypeError from strings where numbers go
    rc = cli.main(["analyze", str(session)])
    assert rc == 0 and "\x1b" not in capsys.readouterr().out
    (session / "record.bin").write_bytes(b"SSREC01\n" + b"\xff" * 80)
    rc = cli.main(["analyze", str(session)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "record.bin" in err[0]
    (session / "record.bin").unlink()
    os.symlink("/dev/zero", session / "record.bin")
    rc = cli.main(["analyze", str(session)])
    err = capsys.readouterr().err.strip().splitlines()
    # core/untrusted.py names what the path is (issue 29's bounded reader)
    assert rc == 2 and err == [f"stallscope: error: {session / 'record.bin'}: is a character "
                               "device, not a regular file"]
