"""`stallscope-cli check`: a CI guard over real runs: exit 0/1 with one line per failed
condition, JUnit XML, a baseline, `check -- script.py` running it first, and bad input (exit 2,
one line)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from fixture_traces import fixture_path
from runner_helpers import run, write_script
from scripts import training

from stallscope.core import cli
from stallscope.core.capture.options import sessions_root
from stallscope.core.units import pct

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess), DataLoader workers

# Each batch (one item) takes 200 ms in the main process; a step computes 300 ms (a sleep).
# Without workers ~40% of the time waits on data; two workers load the next batches meanwhile.
# Steps this long keep the tuned run's wait (handing each batch over from a worker: ~1 ms of
# CPU, ~13 ms at load 13 on 2 cores) far below 10% on a busy machine; 7 ms of every 73 ms step
# were, at 5 ms items and 60 ms steps. 40 steps reach steady state (docs/definitions.md).
SCRIPT = training(items=40, batch=1, item_s=0.2, step_s=0.3)


def check(capsys, *argv) -> tuple[int, list[str], list[str]]:
    rc = cli.main(["check", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out.splitlines(), out.err.splitlines()


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """(slow, tuned): the script run to its end, without and with two workers."""
    out = []
    for name, options in (("slow", ()), ("tuned", ("--set", "num_workers=2"))):
        folder = tmp_path_factory.mktemp(name)
        script = write_script(folder, SCRIPT)
        proc, session = run(folder, script, "--no-stop-after-window", *options)
        assert proc.returncode == 0, proc.stderr
        out.append(session)
    return out


def test_check_fails_the_slow_run_and_passes_the_tuned(sessions, capsys, tmp_path):
    slow, tuned = sessions
    rc, out, _ = check(capsys, slow, "--max-data-wait", "10%", "--max-step-ms", "5000")
    assert rc == 1 and len(out) == 1
    assert out[0].startswith("FAIL data wait ") and out[0].endswith("> 10.0% (--max-data-wait)")
    wait = float(out[0].split()[3].rstrip("%"))
    assert 25 < wait < 70
    junit = tmp_path / "check.xml"
    rc, out, _ = check(capsys, tuned, "--max-data-wait", "10%", "--junit", junit)
    assert rc == 0 and len(out) == 1 and out[0].startswith("ok: 1 condition holds for ")
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == "1" and suite.get("failures") == "0"
    rc, out, _ = check(capsys, slow, "--max-data-wait", "10%", "--max-step-ms", "1",
                       "--junit", junit)
    assert rc == 1 and len(out) == 2 and out[1].startswith("FAIL steady step ")
    suite = ET.parse(junit).getroot()
    failures = [c.find("failure").get("message") for c in suite if c.find("failure") is not None]
    assert suite.get("failures") == "2" and failures == [line[5:] for line in out]


def test_check_states_the_figures_analyze_states(sessions, capsys):
    """One statistic: check's data wait and step time are the whole run's steady figures that
    `analyze --json` writes under "run" (not a median beside a sum-based share)."""
    slow, _ = sessions
    assert cli.main(["analyze", str(slow), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["run"]
    rc, out, _ = check(capsys, slow, "--max-data-wait", "1%", "--max-step-ms", "1")
    assert rc == 1 and len(out) == 2
    assert out[0].startswith(f"FAIL data wait {pct(run['data_wait_share'])} incl. epoch starts > ")
    assert out[1].startswith(f"FAIL steady step {run['step_ms']:,.2f} ms > 1 ms")


def test_check_against_a_baseline(sessions, capsys):
    slow, tuned = sessions
    rc, out, _ = check(capsys, slow, "--baseline", tuned, "--max-slowdown", "5%")
    assert rc == 1 and len(out) == 1 and "(--max-slowdown)" in out[0]
    assert f"in {tuned}" in out[0]
    rc, out, _ = check(capsys, tuned, "--baseline", slow, "--max-slowdown", "5%")
    assert rc == 0 and out[0].startswith("ok: 1 condition holds")


def test_check_runs_a_script_first(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    script = write_script(tmp_path, SCRIPT, name="train.py")
    rc, out, err = check(capsys, "--max-data-wait", "10%", "--", script)
    assert rc == 1 and len(out) == 1 and out[0].startswith("FAIL data wait ")
    rc, out, _ = check(capsys, "--max-data-wait", "10%", "--set", "num_workers=2", "--", script)
    assert rc == 0, out
    made = sorted((tmp_path / "data" / "stallscope" / "sessions").iterdir())
    assert len(made) == 2 and all(p.name.startswith("train-") for p in made)
    assert sessions_root() == tmp_path / "data" / "stallscope" / "sessions"


def test_bad_input_is_one_line_exit_2(sessions, capsys, tmp_path):
    slow, _ = sessions
    cpu_trace = fixture_path("hta_cpu_only")
    cases = [
        ((tmp_path / "nope", "--max-step-ms", "3"), "no such file or folder"),
        ((slow,), "nothing to check"),
        ((slow, "--max-data-wait", "lots"), "--max-data-wait lots: expected a percentage"),
        ((slow, "--max-step-ms", "-1"), "must be > 0"),
        ((slow, "--max-slowdown", "5%"), "--max-slowdown needs --baseline"),
        ((cpu_trace, "--min-utilization", "60%"), "no GPU activity"),
        ((slow, "extra", "--max-step-ms", "3"), "check takes one PATH"),
    ]
    for argv, message in cases:
        rc, out, err = check(capsys, *argv)
        assert rc == 2 and out == [] and len(err) == 1, (argv, err)
        assert message in err[0], (argv, err)


def test_a_run_without_steps_is_not_checked(tmp_path, capsys):
    """The runner saw no step (a script without optimizer or DataLoader, recorded whole): its
    trace's one span is the profiler's own, no step to measure, so nothing passes silently."""
    script = write_script(tmp_path, """
import torch
m = torch.nn.Linear(10, 10)
for i in range(50):
    y = m(torch.randn(64, 10)).sum()
""")
    proc, session = run(tmp_path, script, "--wait", "0", "--warmup", "0")
    assert proc.returncode == 0 and (session / "traces").is_dir(), proc.stderr
    for option, value, what in (("--max-data-wait", "10%", "data wait"),
                                ("--max-step-ms", "1000", "step time")):
        rc, out, err = check(capsys, session, option, value)
        assert rc == 2 and out == [], option
        assert err == [f"stallscope: error: {session}: the runner saw no steps in this run, "
                       f"so its {what} cannot be checked"]


def test_check_a_trace_file(capsys):
    trace = fixture_path("kineto_nw0")
    rc, out, _ = check(capsys, trace, "--min-utilization", "99%")
    assert rc == 1 and out[0].startswith("FAIL GPU utilization ")
    rc, out, _ = check(capsys, trace, "--min-utilization", "1%", "--max-data-wait", "100%")
    assert rc == 0 and out[0].startswith("ok: 2 conditions hold")
