"""SIGTERM and SIGHUP to stallscope-cli (timeout, a CI job's cancel, a closed terminal): the
run it started is stopped by the one stop rule, never left running alone (the runner sits in a
session of its own, so the signal reached stallscope only, which died and left it holding the
machine); a run on a host goes on there after a SIGHUP, as after a dropped connection, with the
line that follows it again. Real runner processes; a real sshd for the host."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_helpers import alive, finished, write_script
from scripts import training

pytestmark = pytest.mark.runner

CLI = [sys.executable, "-m", "stallscope.core.cli", "run", "--no-analyze",
       "--no-stop-after-window"]


def started(session: Path, proc: subprocess.Popen) -> None:
    """Until the run has ended a step."""
    events = session / "events.jsonl"
    while not events.exists() or '"step"' not in events.read_text():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_cli_stops_the_run_it_started(tmp_path, signum):
    script = write_script(tmp_path, training(forever=True, step_s=0.05))
    session = tmp_path / "s"
    proc = subprocess.Popen([*CLI, "--session", str(session), "--", str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started(session, proc)
    runner = next(json.loads(x)["pid"] for x in (session / "events.jsonl").read_text()
                  .splitlines() if '"started"' in x)
    proc.send_signal(signum)  # the CLI alone, as `timeout` or a job runner sends it
    _, err = proc.communicate(timeout=60)
    assert not alive(runner), err
    assert finished(session)["rc"] is not None, err
    assert proc.returncode == 128 + signal.SIGTERM, err  # the runner's end: SIGTERM, stopped


def test_a_run_on_a_host_goes_on_after_a_hangup(host, tmp_path):
    script = write_script(tmp_path, training(forever=True, step_s=0.05))
    session = tmp_path / "m"
    proc = subprocess.Popen([*CLI, *host, "--session", str(session), "--", str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ)
    started(session, proc)
    remote = Path(json.loads((session / "run.json").read_text())["remote"]["session"])
    pid = int((remote / ".runner.pid").read_text())
    proc.send_signal(signal.SIGHUP)  # the terminal closed
    _, err = proc.communicate(timeout=60)
    try:
        assert proc.returncode == 128 + signal.SIGHUP, err
        assert f"the run goes on there: stallscope-cli attach {host[1]}:{remote}" in err, err
        time.sleep(1.0)
        assert alive(pid) and not (remote / ".runner.rc").exists()
    finally:
        os.killpg(pid, signal.SIGKILL)
