"""A run ended from outside: SIGTERM (the app's Stop) and SIGKILL, and torchrun ranks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from runner_helpers import LOADER, RUNNER, events, finished, spans, trace_events, write_script

from stallscope.core.session.reader import EventFollower, has_finished, open_session, write_finished

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess), signals sent to them

FOREVER = LOADER + """
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
while True:
    for x, y in DataLoader(Slow(), batch_size=8, num_workers=1, persistent_workers=True):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def start(tmp_path, *options):
    script = write_script(tmp_path, FOREVER)
    session = tmp_path / "session"
    proc = subprocess.Popen([sys.executable, str(RUNNER), "--session", str(session), *options,
                             "--", str(script)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=tmp_path)
    return proc, session


def wait_for_step(proc, session, n: int, timeout: float = 60.0) -> list[dict]:
    follower = EventFollower(session)
    seen: list[dict] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen += follower.poll()
        if any(e["event"] == "step" and e["n"] >= n for e in seen):
            return seen
        assert proc.poll() is None, f"runner ended early with {proc.returncode}"
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"no step {n} within {timeout} s")


def test_sigterm_stops_cleanly_and_keeps_partial_trace(tmp_path):
    proc, session = start(tmp_path, "--no-stop-after-window", "--active", "50")
    wait_for_step(proc, session, 4)
    workers = psutil.Process(proc.pid).children(recursive=True)
    assert workers, "the DataLoader worker should be running"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    fin = finished(session)
    assert fin["reason"] == "stopped by SIGTERM" and fin["signal"] == "SIGTERM"
    ready = events(session, "trace_ready")
    assert len(ready) == 1 and ready[0]["complete"] is False
    names = [n for _, _, n in spans(trace_events(session / ready[0]["path"]), "ProfilerStep#")]
    assert names[0] == "ProfilerStep#2" and len(names) >= 3
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, f"worker processes left behind: {alive}"


def test_sigkill_leaves_session_for_the_app_to_close(tmp_path):
    proc, session = start(tmp_path, "--no-stop-after-window")
    wait_for_step(proc, session, 1)
    workers = psutil.Process(proc.pid).children(recursive=True)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert not has_finished(session)
    assert write_finished(session, -9, "killed by SIGKILL")
    assert not write_finished(session, -9, "twice")  # a session ends once
    s = open_session(session)
    assert s.finished["reason"] == "killed by SIGKILL"
    assert s.finished["written_by"] == "stallscope app"
    assert len(s.steps()) >= 2
    psutil.wait_procs(workers, timeout=10)  # torch's workers notice their parent died


@pytest.mark.slow
def test_torchrun_two_ranks(tmp_path):
    script = write_script(tmp_path, """
import torch, torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
for x, y in DataLoader(data, batch_size=8, sampler=DistributedSampler(data)):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("rank", dist.get_rank(), "done")
dist.destroy_process_group()
""", name="ddp.py")
    session = tmp_path / "session"
    proc = subprocess.run([sys.executable, str(RUNNER), "--session", str(session),
                           "--nproc-per-node", "2", "--active", "2", "--", str(script)],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    fin = finished(session)
    assert fin["reason"] == "stopped after profiling window"
    assert set(fin["ranks"]) == {"0", "1"}
    assert all(r["rc"] == 0 and r["steps"] == 4 for r in fin["ranks"].values())
    for rank in (0, 1):
        steps = events(session, "step", name=f"events.rank{rank}.jsonl")
        assert [s["n"] for s in steps] == [0, 1, 2, 3] and {s["rank"] for s in steps} == {rank}
        ready = events(session, "trace_ready", name=f"events.rank{rank}.jsonl")
        assert ready[0]["path"].startswith(f"traces/ddp_rank{rank}.")
        assert (session / f"stdout.rank{rank}.log").exists()
    s = open_session(session)
    assert s.ranks == [0, 1] and len(s.traces()) == 2
    assert s.finished["ranks"] == fin["ranks"]


# ---- how a run ends when the script leaves something behind (issue #20's runner bullet)

STEPS = """
import torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(8):
    loss = model(torch.randn(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def run_with_grace(tmp_path, source, grace="1.5", *options, timeout=60, name="session"):
    script = write_script(tmp_path, source)
    session = tmp_path / name
    env = {**os.environ, "STALLSCOPE_EXIT_GRACE_S": grace}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(RUNNER), "--session", str(session), *options,
                           "--", str(script)], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=timeout)
    return proc, session, time.monotonic() - t0


def test_non_daemon_thread_does_not_keep_the_run_forever(tmp_path):
    proc, session, took = run_with_grace(tmp_path, """
import threading, time
threading.Thread(target=time.sleep, args=(600,), name="sleeper").start()
""" + STEPS)
    assert proc.returncode == 0, proc.stderr
    fin = finished(session)
    assert fin["rc"] == 0 and fin["threads_left"] == ["sleeper"]
    assert ("still holds the interpreter" in proc.stderr
            and "a non-daemon thread of the script (sleeper)" in proc.stderr)
    assert took < 40


def test_blocking_atexit_handler_is_named_and_ended(tmp_path):
    proc, session, took = run_with_grace(tmp_path, """
import atexit, time
def hang():
    time.sleep(600)
atexit.register(hang)
""" + STEPS, "1.5", "--no-stop-after-window")
    assert proc.returncode == 0, proc.stderr
    assert finished(session)["reason"] == "completed"
    assert "an atexit handler (hang at " in proc.stderr and "script.py:4)" in proc.stderr
    assert took < 40


def test_forked_child_outliving_the_script_is_listed_and_ended(tmp_path):
    proc, session, _ = run_with_grace(tmp_path, """
import os, time
pid = os.fork()
if pid == 0:
    time.sleep(600)   # a copy of the runner that never ends by itself
    os._exit(0)
open("child.pid", "w").write(str(pid))
""" + STEPS)
    assert proc.returncode == 0, proc.stderr
    child = int((tmp_path / "child.pid").read_text())
    fin = finished(session)
    assert [p["pid"] for p in fin["left_running"]] == [child]
    assert f"ended 1 process(es) the script left running: pid {child}" in proc.stderr
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == "zombie"
    assert len([e for e in events(session) if e["event"] == "finished"]) == 1


def test_a_script_dying_of_sigalrm_reports_the_real_status(tmp_path, capfd):
    # Each alarm is set after the steps: set before them, it raced the 8 profiled steps (on a
    # loaded machine they took longer than the alarm, and fewer than 8 were counted).
    proc, session, _ = run_with_grace(tmp_path, """
import signal, time
""" + STEPS + """
signal.alarm(1)
time.sleep(30)
""", "5", "--no-stop-after-window")
    assert proc.returncode == -signal.SIGALRM  # died of it, as under plain python
    fin = finished(session)
    assert fin["rc"] == 128 + signal.SIGALRM and fin["reason"] == "killed by SIGALRM"
    assert fin["steps"] == 8

    # an alarm still pending when the script ends (here it would ring during a slow atexit
    # handler, after `finished`) does not change the exit status
    proc, session, _ = run_with_grace(tmp_path, """
import atexit, signal, time
atexit.register(time.sleep, 5)
""" + STEPS + """
signal.alarm(2)
""", "20", "--no-stop-after-window", name="pending")
    assert finished(session)["rc"] == 0 and finished(session)["reason"] != "killed by SIGALRM"
    assert proc.returncode == 0

    # the CLI's summary line says the status the CLI exits with
    from stallscope.core import cli

    script = write_script(tmp_path, "import signal, time\nsignal.alarm(1)\ntime.sleep(30)\n",
                          name="alarm.py")
    rc = cli.main(["run", "--session", str(tmp_path / "cli"), "--no-analyze", "--",
                   str(script)])
    err = capfd.readouterr().err
    assert rc == 128 + signal.SIGALRM
    assert "killed by SIGALRM (rc 142)" in err


def test_stop_landing_in_a_del_that_swallows_it_still_ends_the_run(tmp_path):
    """Python prints and drops an exception raised inside __del__ (a DataLoader iterator's
    shuts its workers down there): the runner raises the Stop again until it lands."""
    script = write_script(tmp_path, """
import time, torch
class Slow:
    def __del__(self):
        time.sleep(0.3)   # 60% of each step: a SIGTERM often lands in here
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
while True:
    Slow()
    time.sleep(0.2)
    loss = model(torch.randn(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
""")
    session = tmp_path / "session"
    for attempt in range(3):
        folder = session / str(attempt)
        proc = subprocess.Popen([sys.executable, str(RUNNER), "--session", str(folder),
                                 "--no-stop-after-window", "--", str(script)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_step(proc, folder, 3)
        time.sleep(0.1 * attempt)
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("the Stop was swallowed: the run went on")
        assert rc == 128 + signal.SIGTERM, rc
        assert finished(folder)["reason"] == "stopped by SIGTERM"


def test_a_stop_while_dataloader_workers_are_still_starting_is_a_stop(tmp_path):
    """Ended by the runner before torch's worker loop has set its own SIGTERM handler, a
    worker dies of the signal; torch's SIGCHLD handler must not turn that into the run's
    error (seen in CI on a loaded machine: "DataLoader worker ... killed by signal")."""
    script = write_script(tmp_path, """
import multiprocessing.util, os, signal, time, torch
from torch.utils.data import DataLoader, TensorDataset

multiprocessing.util.register_after_fork(time, lambda _: time.sleep(5))  # workers start slowly
it = iter(DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8, num_workers=2))
os.kill(os.getpid(), signal.SIGTERM)  # the Stop lands while the iterator is alive
time.sleep(30)
""")
    session = tmp_path / "session"
    proc = subprocess.run([sys.executable, str(RUNNER), "--session", str(session), "--",
                           str(script)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    fin = finished(session)
    assert (proc.returncode, fin["reason"]) == (128 + signal.SIGTERM, "stopped by SIGTERM"), \
        proc.stderr
