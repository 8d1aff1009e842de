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
