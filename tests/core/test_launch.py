"""core/launch on this machine: one launcher for the CLI, tune, check and the app. Real runs of
small scripts through the runner; their events, output, Stop and Ending."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import psutil
import pytest
from runner_helpers import write_script
from scripts import training

from stallscope.core.capture import layout
from stallscope.core.capture.closing import close_run
from stallscope.core.launch import STOPPED_BY_USER, Job, Where, ending_of, start
from stallscope.core.session.events import Finished, StepEvent, TraceReady

pytestmark = pytest.mark.runner

ARGS = ["it's a \"test\"", "$(touch /tmp/stallscope-pwned)", "a;b", "$HOME", "  spaced  "]


def collect(run, timeout=120.0):
    events, deadline = [], time.monotonic() + timeout
    while run.running and time.monotonic() < deadline:
        events += run.poll()
        time.sleep(0.05)
    return events + run.poll()


def test_a_local_run_reports_steps_traces_output_and_its_end(tmp_path):
    script = write_script(tmp_path, training(items=48, head="print(sys.argv[1:])"))
    out: list[tuple[bytes, bool]] = []
    run = start(Where(), Job(script=str(script), args=ARGS, session=tmp_path / "s",
                             options={"stop_after_window": False}),
                on_output=lambda data, is_err: out.append((data, is_err)))
    assert run.local_pid and run.remote_session is None
    events = collect(run)
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [e.n for e in steps] == list(range(6))
    traces = [e for e in events if isinstance(e, TraceReady)]
    assert len(traces) == 1 and Path(traces[0].path).is_absolute()
    assert Path(traces[0].path).is_file()
    assert run.ending is not None and run.ending.rc == 0 and run.ending.reason == "completed"
    assert run.ending.written == () and run.ending.ranks[None].steps == 6
    stdout = b"".join(d for d, err in out if not err).decode()
    assert repr(ARGS) in stdout  # every argument reached the script exactly
    assert not Path("/tmp/stallscope-pwned").exists()


def test_stop_ends_the_runner_and_its_workers(tmp_path):
    script = write_script(tmp_path, training(forever=True, loader="num_workers=2",
                                             step_s=0.02))
    run = start(Where(), Job(script=str(script), session=tmp_path / "s"))
    events = []
    while not any(isinstance(e, StepEvent) for e in events):
        events += run.poll()
        assert run.running
        time.sleep(0.05)
    tree = psutil.Process(run.local_pid).children(recursive=True)
    assert len(tree) >= 2  # the DataLoader workers
    run.stop()
    ending = run.wait(60)
    assert ending is not None and ending.rc == 128 + signal.SIGTERM
    assert ending.reason == "stopped by SIGTERM" and ending.written == ()
    assert not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_a_runner_that_ignores_sigterm_is_killed_and_its_session_closed(tmp_path):
    """The grace rule's second half: SIGKILL to the group; the launcher writes `finished`."""
    script = write_script(tmp_path, training(forever=True, step_s=0.02))
    run = start(Where(), Job(script=str(script), session=tmp_path / "s"))
    while not any(isinstance(e, StepEvent) for e in run.poll()):
        time.sleep(0.05)
    os.kill(run.local_pid, signal.SIGSTOP)  # frozen: it cannot act on the SIGTERM
    run.stop(grace=0.5)
    ending = run.wait(30)
    assert ending is not None and ending.rc == -signal.SIGKILL
    assert ending.reason == STOPPED_BY_USER and ending.written == ("events.jsonl",)
    queued = run.poll()  # wait() kept the events for the next poll
    assert [e.reason for e in queued if isinstance(e, Finished)] == [STOPPED_BY_USER]
    assert run.poll() == []
    assert ending.finished is not None and ending.finished.reason == STOPPED_BY_USER


def test_an_interpreter_that_does_not_exist_is_one_line(tmp_path):
    from stallscope.core.errors import StallscopeError

    script = write_script(tmp_path, "print(1)\n")
    with pytest.raises(StallscopeError, match="cannot start the interpreter /nonexistent/py"):
        start(Where(python="/nonexistent/py"), Job(script=str(script), session=tmp_path / "s"))


def test_a_run_whose_ranks_all_finished_is_not_closed_again(tmp_path):
    """A script that launched its own ranks (Lightning devices=2): the runner became rank 0,
    the session holds only rank files, each with its record. The launcher reports both and
    writes nothing (it used to add "runner ended with code 0 without a finished record")."""
    for rank in (0, 1):
        path = tmp_path / layout.events_name(rank)
        path.write_bytes(layout.encode(layout.record(layout.STEP, rank, n=1)))
        layout.append_finished(path, 0, "completed", rank, steps=1)
    assert close_run(tmp_path, 0, "runner ended with code 0 without a finished record") == []
    ending = ending_of(tmp_path, 0, "unused")
    assert ending.reason == "completed" and sorted(ending.ranks) == [0, 1]
    assert all(isinstance(f, Finished) and f.rank == r for r, f in ending.ranks.items())
    assert not (tmp_path / layout.EVENTS).exists()


def test_a_killed_run_gets_one_record_per_rank_that_lacks_it(tmp_path):
    (tmp_path / layout.events_name(0)).write_bytes(b"")
    one = tmp_path / layout.events_name(1)
    layout.append_finished(one, 1, "exception", 1)
    assert close_run(tmp_path, -9, "killed by SIGKILL") == ["events.rank0.jsonl"]
    assert close_run(tmp_path, -9, "killed by SIGKILL") == []  # once
    ending = ending_of(tmp_path, -9, "killed by SIGKILL")
    assert ending.ranks[0].reason == "killed by SIGKILL" and ending.ranks[1].reason == "exception"
    assert ending.reason.startswith("ranks ended differently")


def test_cli_run_on_a_terminal_draws_a_progress_line(tmp_path):
    """stderr a terminal: a live line (steps, step time, traces) redrawn in place and cleared
    before the summary; the script's own output still comes through."""
    import pty
    import sys

    script = write_script(tmp_path, training(items=64, step_s=0.15, head="print('hello')"))
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI on a pseudo-terminal
        os.execv(sys.executable, [sys.executable, "-m", "stallscope.core.cli", "run",
                                  "--no-analyze", "--no-stop-after-window", "--session",
                                  str(tmp_path / "s"), "--", str(script)])
    out = b""
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        out += data
    _, status = os.waitpid(pid, 0)
    text = out.decode()
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "hello" in text
    assert re.search(r"\rstallscope: this computer: step [1-8] · \d+ ms · [01] traces?\r", text)
    summary = text.index("stallscope: session ")
    assert text[:summary].rstrip(" ").endswith("\r")  # the line was cleared before it


@pytest.mark.slow
def test_a_lightning_ddp_run_ends_completed_for_both_ranks(tmp_path):
    """Lightning devices=2 launches its own rank 1; the runner becomes rank 0, so the session
    holds only rank files. The launcher reports both ranks' records and writes none; the
    runner does not report rank 1, already on its way out, as a process left running."""
    pytest.importorskip("lightning")
    script = Path(__file__).resolve().parents[1] / "frameworks" / "lightning_fit.py"
    out: list[bytes] = []
    run = start(Where(), Job(script=str(script), args=["--devices", "2"],
                             session=tmp_path / "s", options={"stop_after_window": False}),
                on_output=lambda data, _: out.append(data))
    ending = run.wait(400)
    assert ending is not None and ending.rc == 0 and ending.reason == "completed"
    assert sorted(ending.ranks) == [0, 1] and ending.written == ()
    assert all(f.reason == "completed" and f.steps == 6 for f in ending.ranks.values())
    text = b"".join(out).decode()
    assert "without a finished record" not in text and "left running" not in text, text
