"""The runner against a hostile script (issue 29): an exception with a 42 MB message is a
capped line in events.jsonl and on the CLI's terminal; a script that closes its stdout or
stderr (the objects or the descriptors) gets no runner traceback; a daemon the script
double-forks does not outlive the run."""

from __future__ import annotations

import os
import time

import pytest
from runner_helpers import DOUBLE_FORK, alive, events, finished, run, write_script

from stallscope.core.capture.writer import MAX_TEXT

pytestmark = pytest.mark.runner

HUGE = """
raise ValueError("x" * (42 << 20))
"""


def test_a_42_mb_exception_message_is_a_capped_line(tmp_path):
    proc, session = run(tmp_path, write_script(tmp_path, HUGE))
    assert proc.returncode == 1
    lines = (session / "events.jsonl").read_bytes().splitlines()
    assert max(len(line) for line in lines) < 4 * MAX_TEXT
    end = finished(session)
    message = end["exception"]["message"]
    assert message.startswith("x" * 100) and message.endswith("x" * 100)
    assert f"[{(42 << 20) - MAX_TEXT:,} characters cut]" in message
    assert end["reason"] == "exception"


@pytest.mark.parametrize("body", [
    "sys.stdout.close()",
    "sys.stdout.close(); sys.stderr.close()",
    "os.close(1); os.close(2)",
    "sys.stderr.close(); raise RuntimeError('after closing')",
    "os.close(2); raise RuntimeError('after closing')",
])
def test_a_script_that_closes_its_output_gets_no_runner_traceback(tmp_path, body):
    script = write_script(tmp_path, f"import os, sys\nprint('hello', flush=True)\n{body}\n")
    proc, session = run(tmp_path, script)
    assert "stallscope/core/capture" not in proc.stderr, proc.stderr
    assert "runner error" not in proc.stderr and "lost sys.std" not in proc.stderr
    end = finished(session)
    raised = "raise" in body
    assert end["rc"] == (1 if raised else 0) and proc.returncode == end["rc"], proc.stderr
    assert end["reason"] == ("exception" if raised else "completed")
    if raised:  # the script's own traceback still reaches the terminal and stdout.log
        assert "RuntimeError: after closing" in proc.stderr
        assert "RuntimeError: after closing" in (session / "stdout.log").read_text()
    else:  # the runner's own words still get out
        assert "no steps were seen" in proc.stderr, proc.stderr
    assert events(session, "started")


def test_a_daemon_the_script_double_forks_is_ended_with_the_run(tmp_path):
    proc, session = run(tmp_path, write_script(tmp_path, DOUBLE_FORK))
    daemon = int((tmp_path / "daemon.pid").read_text())
    try:
        end = finished(session)
        assert end["rc"] == 0 == proc.returncode, proc.stderr
        assert [p["pid"] for p in end["left_running"]] == [daemon]
        assert not alive(daemon)  # ended and reaped before `finished` was written
    finally:
        if alive(daemon):
            os.kill(daemon, 9)
            time.sleep(0.1)
