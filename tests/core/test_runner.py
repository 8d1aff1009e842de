"""End to end: real scripts through core/capture/runner.py (by file path, in a subprocess), on CPU.

Each test reads back what the runner wrote: events.jsonl, the gzip'd trace, stdout.log."""

from __future__ import annotations

import ast
import sys

import numpy as np
import pytest
from runner_helpers import (
    DEMO,
    LOADER,
    RUNNER,
    TRAIN,
    events,
    finished,
    run,
    session_of,
    spans,
    trace_events,
    write_script,
)

from stallscope.core.capture import runner

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess)


def test_runner_imports_only_stdlib_and_torch():
    """capture/ must run in the user's interpreter where stallscope is not installed: its files
    import the standard library, torch, each other (relative imports) and nothing else;
    line_profiler only in lineprof_capture.py."""
    for path in sorted(RUNNER.parent.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        roots = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots.add(node.module.split(".")[0])
        allowed = set(sys.stdlib_module_names) | {"torch", "_stallscope_capture"}
        if path.name == "lineprof_capture.py":
            allowed.add("line_profiler")
        assert roots <= allowed, (path.name, roots - allowed)


def test_capture_folder_copied_elsewhere_runs(tmp_path):
    """README's remote-box recipe: copy the capture folder, run runner.py from the copy."""
    import shutil

    copy = tmp_path / "capture"
    shutil.copytree(RUNNER.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    script = write_script(tmp_path, TRAIN)
    proc, session = run(tmp_path, script, "--active", "1", "--wait", "0", "--warmup", "0",
                        launcher=[sys.executable, str(copy / "runner.py")])
    assert proc.returncode == 0, proc.stderr
    assert finished(session)["steps"] == 1
    assert "stallscope modules: []" in (session / "stdout.log").read_text()
    assert session_of(session).run["runner"] == str(copy / "runner.py")


def test_optimizer_script_stops_after_window(tmp_path):
    script = write_script(tmp_path, TRAIN)
    proc, session = run(tmp_path, script, args=["--flag", "x"])
    assert proc.returncode == 0, proc.stderr

    steps = events(session, "step")
    assert [s["n"] for s in steps] == [0, 1, 2, 3, 4, 5]
    assert {s["by"] for s in steps} == {"optimizer"}
    assert [s["phase"] for s in steps] == ["wait", "warmup", "active", "active", "active", "active"]
    # one batch of 8 items x 2 ms sleep per step, measured around the DataLoader iterator
    assert all(s["data_wait_ms"] >= 16.0 and s["batches"] == 1 for s in steps)
    assert all(s["wall_ms"] >= s["data_wait_ms"] for s in steps)
    assert all(s["rss"] > 10e6 for s in steps)

    fin = finished(session)
    assert fin["rc"] == 0 and fin["reason"] == "stopped after profiling window"
    assert fin["steps"] == 6 and fin["stepping"] == "optimizer"
    ready = events(session, "trace_ready")
    assert len(ready) == 1 and ready[0]["complete"] is True
    assert ready[0]["path"].startswith("traces/script.") and ready[0]["path"].endswith(
        ".pt.trace.json.gz")
    assert [p.name for p in (session / "traces").iterdir()] == [ready[0]["path"][7:]]

    trace = trace_events(session / ready[0]["path"])
    prof_steps = spans(trace, "ProfilerStep#")
    assert [name for _, _, name in prof_steps] == [f"ProfilerStep#{i}" for i in range(2, 6)]
    loads = spans(trace, "enumerate(DataLoader)#")
    optim = spans(trace, "Optimizer.step#SGD.step")
    assert len(loads) == 4 and len(optim) == 4
    for (lo, hi, _), (dlo, dhi, _), (olo, ohi, _) in zip(prof_steps, loads, optim, strict=True):
        # the step is taken after Optimizer.step returns: both nest inside their ProfilerStep
        assert lo <= dlo < dhi <= olo < ohi <= hi
        assert dhi - dlo >= 16_000  # µs

    out = (session / "stdout.log").read_text()
    assert "stallscope modules: []" in out, "the runner imported stallscope into the script"
    assert "argv: ['--flag', 'x']" in out and "done" not in out
    assert "argv: ['--flag', 'x']" in proc.stdout  # teed, still passed through
    run_json = session_of(session).run
    assert run_json["schedule"] == {"wait": 1, "warmup": 1, "active": 4, "repeat": 1}
    assert run_json["python"] == sys.executable and run_json["torch"]


def test_no_stop_runs_to_the_end(tmp_path):
    script = write_script(tmp_path, TRAIN)
    proc, session = run(tmp_path, script, "--no-stop-after-window", "--active", "2")
    assert proc.returncode == 0, proc.stderr
    fin = finished(session)
    assert fin["reason"] == "completed" and fin["steps"] == 24  # 2 epochs x 12 batches
    assert "done" in (session / "stdout.log").read_text()
    assert [e["complete"] for e in events(session, "trace_ready")] == [True]
    trace = trace_events(session / fin["traces"][0])
    assert [n for _, _, n in spans(trace, "ProfilerStep#")] == ["ProfilerStep#2", "ProfilerStep#3"]


def test_inference_only_steps_per_batch(tmp_path):
    script = write_script(tmp_path, LOADER + """
model = torch.nn.Linear(8, 1).eval()
with torch.no_grad():
    for x, _ in torch.utils.data.DataLoader(Slow(80), batch_size=8):
        model(x)
print("inference done")
""")
    proc, session = run(tmp_path, script, "--no-stop-after-window", "--active", "3")
    assert proc.returncode == 0, proc.stderr
    steps = events(session, "step")
    # ten batches: a step ends when the next batch is asked for (the last one at StopIteration)
    assert [s["n"] for s in steps] == list(range(10))
    assert {s["by"] for s in steps} == {"batch"}
    assert all(s["data_wait_ms"] >= 16.0 for s in steps)
    fin = finished(session)
    assert fin["rc"] == 0 and fin["stepping"] == "batch" and "warning" not in fin
    trace = trace_events(session / fin["traces"][0])
    assert [n for _, _, n in spans(trace, "ProfilerStep#")] == [
        "ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert len(spans(trace, "enumerate(DataLoader)#")) == 3


def test_exception_at_step_3_keeps_partial_trace(tmp_path):
    script = write_script(tmp_path, LOADER + """
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in enumerate(torch.utils.data.DataLoader(Slow(), batch_size=8)):
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if i == 3:
        raise ValueError("boom at step 3")
    opt.step()
""")
    proc, session = run(tmp_path, script)
    assert proc.returncode == 1
    assert "ValueError: boom at step 3" in proc.stderr
    assert [s["n"] for s in events(session, "step")] == [0, 1, 2]
    fin = finished(session)
    assert fin["rc"] == 1 and fin["reason"] == "exception"
    exc = fin["exception"]
    assert exc["type"] == "ValueError" and exc["message"] == "boom at step 3"
    assert exc["step"] == 3
    assert 'script.py", line' in exc["traceback"] and "runner.py" not in exc["traceback"]
    ready = events(session, "trace_ready")
    assert len(ready) == 1 and ready[0]["complete"] is False  # the window was cut short
    names = [n for _, _, n in spans(trace_events(session / ready[0]["path"]), "ProfilerStep#")]
    assert names == ["ProfilerStep#2", "ProfilerStep#3"]
    assert "boom at step 3" in (session / "stdout.log").read_text()


def test_sys_exit_3_via_python_m(tmp_path):
    script = write_script(tmp_path, "import sys\nprint('leaving')\nsys.exit(3)\n")
    proc, session = run(tmp_path, script,
                        launcher=[sys.executable, "-m", "stallscope.core.capture.runner"])
    assert proc.returncode == 3
    fin = finished(session)
    assert fin["rc"] == 3 and fin["reason"] == "exited with code 3"
    assert "leaving" in (session / "stdout.log").read_text()


def test_no_steps_says_so(tmp_path):
    script = write_script(tmp_path, """
import torch
x = torch.randn(64, 64)
print("sum", float((x @ x).abs().sum()) > 0)
""")
    proc, session = run(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    fin = finished(session)
    assert fin["steps"] == 0 and fin["traces"] == []
    assert fin["warning"].startswith("no steps were seen")
    assert "no steps were seen" in proc.stderr and "--wait 0 --warmup 0" in proc.stderr
    assert "sum True" in (session / "stdout.log").read_text()

    # with no wait/warmup the profiler records from the start: whatever exists is saved
    again = tmp_path / "again"
    again.mkdir()
    proc, session = run(again, script, "--wait", "0", "--warmup", "0")
    fin = finished(session)
    assert fin["steps"] == 0 and len(fin["traces"]) == 1
    assert events(session, "trace_ready")[0]["complete"] is False
    trace = trace_events(session / fin["traces"][0])
    assert any(e.get("name") == "aten::mm" for e in trace)
    # the warmup=0 it asked for is no warning pointing at stallscope's own code
    assert "UserWarning" not in proc.stderr and "using warmup" not in proc.stderr


def test_syntax_error(tmp_path):
    script = write_script(tmp_path, "print('hi')\ndef broken(:\n    pass\n")
    proc, session = run(tmp_path, script)
    assert proc.returncode == 1
    fin = finished(session)
    assert fin["reason"] == "syntax error" and fin["exception"]["type"] == "SyntaxError"
    assert "line 2" in fin["exception"]["message"]
    assert "SyntaxError" in (session / "stdout.log").read_text()
    assert not list((session / "traces").iterdir())
    assert "hi" not in proc.stdout  # nothing ran


def test_missing_script(tmp_path):
    proc, session = run(tmp_path, tmp_path / "nope.py")
    assert proc.returncode == 2
    assert f"script not found: {tmp_path / 'nope.py'}" in proc.stderr
    fin = finished(session)
    assert fin["rc"] == 2 and "script not found" in fin["reason"]
    assert (session / "stdout.log").exists()


def test_interpreter_without_torch(tmp_path):
    script = write_script(tmp_path, "print('never')\n")
    # -S: the same interpreter without site-packages, so no torch there
    proc, session = run(tmp_path, script, python=[sys.executable, "-S"])
    assert proc.returncode == 2
    assert "has no torch" in proc.stderr and sys.executable in proc.stderr
    fin = finished(session)
    assert "has no torch" in fin["reason"] and sys.executable in fin["reason"]


def test_unwritable_session_folder(tmp_path):
    script = write_script(tmp_path, "print('never')\n")
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    proc = __import__("subprocess").run(
        [sys.executable, str(RUNNER), "--session", str(blocker / "s"), "--", str(script)],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"session folder {blocker / 's'} is not writable" in proc.stderr
    assert "never" not in proc.stdout


def test_demo_is_dataloader_bound(tmp_path):
    proc, session = run(tmp_path, DEMO, args=["--images", "96"])
    assert proc.returncode == 0, proc.stderr
    s = session_of(session)
    assert s.finished["reason"] == "stopped after profiling window"
    steps = s.steps()
    assert len(steps) == 6
    active = np.array([p == "active" for p in steps.phase])
    share = steps.data_wait_ms[active].sum() / steps.wall_ms[active].sum()
    assert share > 0.5, f"the demo should wait on data most of the time, waited {share:.0%}"
    traces = s.traces()
    assert len(traces) == 1

    from stallscope.core.analysis import analyze
    from stallscope.core.trace import load

    report = analyze(load(session))  # a session folder loads like a trace
    assert [st.name for st in report.steps] == [f"ProfilerStep#{i}" for i in range(2, 6)]
    assert all(st.data_loading_us > 0 for st in report.steps)
    assert "dataloader_bound" in [a.id for a in report.advice]


def test_cli_run_prints_summary(tmp_path, capfd):
    from stallscope.core.cli import main

    script = write_script(tmp_path, TRAIN)
    session = tmp_path / "cli-session"
    rc = main(["run", "--session", str(session), "--active", "2", "--no-analyze", "--",
               str(script), "--x"])
    err = capfd.readouterr().err
    assert rc == 0
    assert f"session {session}: stopped after profiling window (rc 0), 4 steps" in err
    assert "trace " + str(session / "traces") in err
    assert events(session, "step")[-1]["n"] == 3


def test_cli_run_without_script():
    from stallscope.core.cli import main

    assert main(["run", "--active", "2"]) == 2


def test_build_argv_round_trips():
    argv = runner.build_argv("/s", "t.py", ["--lr", "1"], {"active": 7},
                             {"profile_memory": False, "with_stack": True, "nproc_per_node": 2,
                              "lineprof": "auto", "lineprof_depth": 1})
    opts = runner.parse_args(argv)
    assert (opts.session, opts.active, opts.wait, opts.profile_memory, opts.with_stack) == (
        "/s", 7, 1, False, True)
    assert (opts.nproc_per_node, opts.lineprof, opts.lineprof_depth) == (2, "auto", 1)
    assert (opts.script, opts.script_args) == ("t.py", ["--lr", "1"])
    # without `--` the first bare word starts the script's own arguments
    opts = runner.parse_args(["--active", "2", "t.py", "--active", "9"])
    assert (opts.active, opts.script_args) == (2, ["--active", "9"])


@pytest.mark.parametrize("bad", [["--active", "0", "--", "t.py"], ["--wait", "-1", "t.py"], []])
def test_bad_options(bad):
    with pytest.raises(SystemExit) as info:
        runner.parse_args(bad)
    assert info.value.code == 2


def test_two_optimizers_step_once_per_iteration(tmp_path):
    """A GAN-like loop: the first optimizer to step paces the steps."""
    script = write_script(tmp_path, LOADER + """
d, g = torch.nn.Linear(8, 1), torch.nn.Linear(8, 8)
opt_d = torch.optim.SGD(d.parameters(), lr=0.01)
opt_g = torch.optim.Adam(g.parameters(), lr=0.01)
for x, y in DataLoader(Slow(64), batch_size=8):
    opt_d.zero_grad()
    ((d(x) - y) ** 2).mean().backward()
    opt_d.step()
    opt_g.zero_grad()
    (-d(g(x)).mean()).backward()
    opt_g.step()
""")
    proc, session = run(tmp_path, script, "--no-stop-after-window", "--active", "2")
    assert proc.returncode == 0, proc.stderr
    assert [s["n"] for s in events(session, "step")] == list(range(8))
    trace = trace_events(session / finished(session)["traces"][0])
    steps = spans(trace, "ProfilerStep#")
    adam = spans(trace, "Optimizer.step#Adam.step")
    assert len(steps) == 2 and len(adam) == 2
    for (lo, hi, _), (alo, ahi, _) in zip(steps, adam, strict=True):
        assert lo <= alo < ahi <= hi  # the second optimizer's step stays inside its step
