"""Real frameworks under the runner: HF Trainer, accelerate, Lightning (also its own DDP
launcher) and a manual accumulation loop (tests/frameworks/*.py: config-built tiny models,
nothing downloaded, a Dataset that sleeps a known time per item). Each script keeps its own
record of the optimizer steps it took (FRAMEWORK_RECORD); the runner's steps, batches per step,
call sites, closure annotations and rank files are checked against it. Skipped (with the reason)
where a framework is not installed: `pip install -e .[frameworks]`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from runner_helpers import RUNNER, events, spans, trace_events

from stallscope.core.capture.overrides import change_line
from stallscope.core.tune.script import script_of

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess), DataLoader workers

SCRIPTS = Path(__file__).resolve().parents[1] / "frameworks"
GLUED = re.compile(r"global_step=\d+\S*rank=")


def need(module: str) -> None:
    pytest.importorskip(module, reason=f"{module} is not installed (pip install -e .[frameworks])")


def line_of(script: str, text: str) -> int:
    lines = (SCRIPTS / script).read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def run_framework(tmp_path: Path, script: str, *options: str, args=(), timeout=240):
    """The script under the runner (by path, from tmp_path); returns (proc, session, record)."""
    session, record = tmp_path / "session", tmp_path / "record.jsonl"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HOME": str(tmp_path / "hf"), "PYTHONUNBUFFERED": "1",
           "FRAMEWORK_RECORD": str(record), "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, str(RUNNER), "--session", str(session), *options, "--",
           str(SCRIPTS / script), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Error in sitecustomize" not in proc.stderr  # every child Python starts cleanly
    own = [json.loads(x) for x in record.read_text().splitlines()] if record.exists() else []
    return proc, session, own


def finished_of(session: Path, name: str = "events.jsonl") -> dict:
    last = events(session, name=name)[-1]
    assert last["event"] == "finished", last
    return last


def loader_of(fin: dict) -> dict:
    """The one DataLoader record (a framework's re-created loader shares the user's site)."""
    assert len(fin["dataloaders"]) == 1, fin["dataloaders"]
    return fin["dataloaders"][0]


def test_manual_accumulation_steps_are_optimizer_steps(tmp_path):
    proc, session, own = run_framework(tmp_path, "manual_accum.py", "--no-stop-after-window")
    steps = events(session, "step")
    assert len(own) == 3 and len(steps) == 3  # 12 batches, step() every 4th
    assert [s["batches"] for s in steps] == [o["batches"] for o in own] == [4, 4, 4]
    assert {s["by"] for s in steps} == {"optimizer"}
    # 4 batches x 4 items x 1 ms sleep in every step, none of them a micro-batch "step"
    assert all(s["data_wait_ms"] >= 16.0 for s in steps)
    fin = finished_of(session)
    assert fin["steps"] == 3 and fin["batches"] == 12 and fin["stepping"] == "optimizer"


def test_accelerate_loop_no_prefetched_step_and_user_call_site(tmp_path):
    need("accelerate")
    line = line_of("accelerate_loop.py", "DataLoader(Sleepy")
    proc, session, own = run_framework(
        tmp_path, "accelerate_loop.py", "--no-stop-after-window",
        "--set", f"accelerate_loop.py:{line}:num_workers=1")
    steps = events(session, "step")
    assert len(own) == 10 and len(steps) == 10  # 40 items / 4, though one batch is fetched ahead
    assert [s["batches"] for s in steps] == [1] * 10
    fin = finished_of(session)
    assert fin["batches"] == 10 and fin["stepping"] == "optimizer"
    loader = loader_of(fin)
    assert (Path(loader["file"]).name, loader["line"]) == ("accelerate_loop.py", line)
    assert loader["created"] == 2  # the user's and accelerate's re-created one, one site
    assert loader["overridden"] == {"num_workers": {"from": 0, "to": 1}}
    assert loader["effective"]["num_workers"] == 1
    assert "matched no DataLoader" not in proc.stderr


def test_hf_trainer_max_steps_30(tmp_path):
    need("transformers")
    need("accelerate")
    proc, session, own = run_framework(tmp_path, "hf_trainer.py", "--no-stop-after-window",
                                       args=["--out", str(tmp_path / "out")])
    steps = events(session, "step")
    assert [o["step"] for o in own] == list(range(1, 31))
    assert len(steps) == 30 and [s["batches"] for s in steps] == [1] * 30
    fin = finished_of(session)
    assert fin["steps"] == 30 and fin["batches"] == 30
    loader = loader_of(fin)
    # HF builds the DataLoader from TrainingArguments: the user's line is trainer.train(),
    # the setting to change is TrainingArguments(dataloader_num_workers=...)
    assert (Path(loader["file"]).name, loader["line"]) == (
        "hf_trainer.py", line_of("hf_trainer.py", "trainer.train()"))
    assert loader["settings"]["owner"] == "TrainingArguments"
    assert loader["settings"]["names"]["num_workers"] == "dataloader_num_workers"
    assert loader["batches"] == 31  # accelerate fetched one ahead: counted, but no step of its own
    # what tune and the DataLoader card say: the setting, at the line that makes it (issue 33:
    # not trainer.train()'s)
    made = line_of("hf_trainer.py", "args = TrainingArguments(")
    assert loader["settings"]["site"].endswith(f"hf_trainer.py:{made}") and made != loader["line"]
    assert change_line(loader, {"num_workers": 2}).endswith(
        f"hf_trainer.py:{made}: TrainingArguments(dataloader_num_workers=0) "
        "-> dataloader_num_workers=2")
    info = script_of(session)  # what the app's fix loop reads from the session
    assert info.site == loader["site"] and info.change({"num_workers": 2}) == change_line(
        loader, {"num_workers": 2})


def test_hf_trainer_gradient_accumulation_window_is_real_steps(tmp_path):
    need("transformers")
    need("accelerate")
    proc, session, own = run_framework(
        tmp_path, "hf_trainer.py", "--no-stop-after-window",
        args=["--out", str(tmp_path / "out"), "--accum", "4", "--steps", "6"])
    steps = events(session, "step")
    assert len(own) == 6 and len(steps) == 6
    assert [s["batches"] for s in steps] == [4] * 6
    assert all(s["data_wait_ms"] >= 16.0 for s in steps)  # 4 batches x 4 items x 1 ms
    fin = finished_of(session)
    trace = trace_events(session / fin["traces"][0])
    window = spans(trace, "ProfilerStep#")
    fetches = spans(trace, "enumerate(DataLoader)#")
    assert [n for _, _, n in window] == [f"ProfilerStep#{i}" for i in range(2, 6)]
    for lo, hi, _ in window:  # every recorded step is a whole optimizer step
        assert sum(lo <= a and b <= hi for a, b, _ in fetches) == 4


def test_lightning_accumulation_and_set_on_the_users_line(tmp_path):
    need("lightning")
    line = line_of("lightning_fit.py", "return DataLoader(")
    proc, session, own = run_framework(
        tmp_path, "lightning_fit.py", "--no-stop-after-window",
        "--set", f"lightning_fit.py:{line}:num_workers=1", args=["--accum", "4"])
    steps = events(session, "step")
    assert len(own) == 3 and len(steps) == 3  # 48 items / 4 a batch / 4 a step
    assert [s["batches"] for s in steps] == [4, 4, 4]
    fin = finished_of(session)
    loader = loader_of(fin)
    assert (Path(loader["file"]).name, loader["line"], loader["function"]) == (
        "lightning_fit.py", line, "train_dataloader")
    assert loader["overridden"] == {"num_workers": {"from": 0, "to": 1}}
    assert "matched no DataLoader" not in proc.stderr
    assert change_line(loader, {"num_workers": 2}).endswith(
        f"lightning_fit.py:{line}: DataLoader(...) -> num_workers=2")


def test_lightning_iterable_dataset_fetched_ahead_is_no_extra_batch(tmp_path):
    need("lightning")
    _, session, own = run_framework(tmp_path, "lightning_fit.py", "--no-stop-after-window",
                                    args=["--iterable", "1"])
    steps = events(session, "step")
    assert len(own) == 12 and len(steps) == 12
    # the fetcher takes one batch in its __iter__: it feeds step 0, not an extra batch there
    # (and the last step still has its batch, though nothing is fetched for it)
    assert [s["batches"] for s in steps] == [1] * 12


def host_split(trace: Path, shares: bool = True) -> dict[str, float]:
    """The main thread's step time by cause: shares, or µs."""
    from stallscope.core.analysis import analyze
    from stallscope.core.trace import load

    split = analyze(load(trace)).host_by_cause
    total = sum(split.values()) if shares else 1.0
    return {k: v / total for k, v in split.items()}


def test_lightning_closure_is_not_the_optimizer(tmp_path):
    """Lightning runs training_step and backward inside optimizer.step(closure): the runner's
    stallscope#closure annotation keeps that compute out of the optimizer cause."""
    need("lightning")
    _, session, _ = run_framework(tmp_path, "lightning_fit.py", args=["--compute", "512"])
    trace_path = session / finished_of(session)["traces"][0]
    trace = trace_events(trace_path)
    closures = spans(trace, "stallscope#closure")
    steps = spans(trace, "Optimizer.step#SGD.step")
    assert len(closures) == len(steps) == 4
    for (clo, chi, _), (slo, shi, _) in zip(closures, steps, strict=True):
        assert slo <= clo < chi <= shi
    lightning = host_split(trace_path)
    assert lightning["optimizer"] < 0.25, lightning
    # the optimizer cause holds at most Optimizer.step's own time, its closures (training_step
    # and backward) left out: exact, whatever the load (a plain twin script compared by shares
    # read 11% optimizer once in CI at load 4, from one preempted step of its own)
    own_us = sum(shi - slo for slo, shi, _ in steps) - sum(chi - clo for clo, chi, _ in closures)
    assert 0 < own_us and host_split(trace_path, shares=False)["optimizer"] <= own_us + 1.0


def test_lightning_ddp_launcher_profiles_every_rank(tmp_path):
    need("lightning")
    proc, session, own = run_framework(tmp_path, "lightning_fit.py", "--no-stop-after-window",
                                       "--lineprof", "auto", args=["--devices", "2"])
    assert sorted(o["rank"] for o in own) == [0] * 6 + [1] * 6  # 48 items / 4 / 2 ranks
    traces = sorted(p.name for p in (session / "traces").iterdir())
    assert [t.split(".")[0] for t in traces] == ["lightning_fit_rank0", "lightning_fit_rank1"]
    for rank in (0, 1):
        name = f"events.rank{rank}.jsonl"
        steps = events(session, "step", name=name)
        assert len(steps) == 6 and [s["batches"] for s in steps] == [1] * 6
        fin = finished_of(session, name)
        assert fin["rank"] == rank and fin["reason"] == "completed" and fin["steps"] == 6
    assert not (session / "events.jsonl").exists()
    out = proc.stdout + proc.stderr
    said = [x for x in out.splitlines() if "global_step=" in x]
    assert len(said) == 12 and not any(GLUED.search(x) for x in said), said
    for rank in (0, 1):
        log = (session / f"stdout.rank{rank}.log").read_text()
        assert f"rank={rank} global_step=6" in log and not GLUED.search(log)
    # line stats: one file per rank, each with its own rank's 24 samples
    stats = {p.name: json.loads(p.read_text()) for p in (session / "lineprof").glob("*.json")}
    assert sorted(stats) == ["Sleepy.__getitem__.rank0.json", "Sleepy.__getitem__.rank1.json"]
    assert [stats[f"Sleepy.__getitem__.rank{r}.json"]["samples"] for r in (0, 1)] == [24, 24]


def test_mp_spawn_ranks_are_profiled_like_torchrun_ranks(tmp_path):
    proc, session, own = run_framework(tmp_path, "mp_spawn.py", "--no-stop-after-window")
    assert sorted(o["rank"] for o in own) == [0] * 8 + [1] * 8
    traces = sorted(p.name.split(".")[0] for p in (session / "traces").iterdir())
    assert traces == ["mp_spawn_rank0", "mp_spawn_rank1"]
    for rank in (0, 1):
        name = f"events.rank{rank}.jsonl"
        assert len(events(session, "step", name=name)) == 8
        fin = finished_of(session, name)
        assert fin["rank"] == rank and fin["reason"] == "completed" and fin["steps"] == 8
        assert f"rank={rank} global_step=8" in (session / f"stdout.rank{rank}.log").read_text()
    assert finished_of(session)["rc"] == 0  # the launching process's own record


def test_child_pythons_still_run_their_own_sitecustomize(tmp_path):
    """The runner's relaunch/sitecustomize.py goes first on child Pythons' PYTHONPATH: the
    interpreter's own sitecustomize still runs after it, and sys.path is left without it."""
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_SITE'] = 'ran'\n")
    relaunch = RUNNER.parent / "relaunch"
    code = ("import os, sys; "
            "print(os.environ.get('OWN_SITE'), any('relaunch' in p for p in sys.path))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": f"{relaunch}{os.pathsep}{own}"})
    assert proc.stdout.split() == ["ran", "False"] and proc.stderr == "", proc.stderr
