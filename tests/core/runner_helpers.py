"""Shared by the runner tests: run a tiny script through core/capture/runner.py BY FILE PATH,
as the app does in the user's interpreter, and read what it wrote."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from stallscope.core.capture import runner
from stallscope.core.session.reader import Session, open_session

RUNNER = Path(runner.__file__).resolve()
DEMO = Path(__file__).resolve().parents[2] / "resources" / "demo" / "train_demo.py"

# A DataLoader whose every item sleeps 2 ms, so each batch of 8 waits at least 16 ms.
LOADER = """
import sys, time, torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __init__(self, n=96):
        self.n = n
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(8), torch.randn(1)
"""

TRAIN = LOADER + """
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
print("stallscope modules:", sorted(m for m in sys.modules if m.startswith("stallscope")))
print("argv:", sys.argv[1:])
for epoch in range(2):
    for i, (x, y) in enumerate(DataLoader(Slow(), batch_size=8)):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
print("done", flush=True)
"""


def write_script(tmp_path: Path, source: str, name: str = "script.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def run(tmp_path: Path, script: Path | str, *options: str, args=(), python: list[str] | None = None,
        launcher: list[str] | None = None,
        timeout: float = 120) -> tuple[subprocess.CompletedProcess, Path]:
    """`python runner.py` by default; `launcher` replaces both (e.g. python -m ...)."""
    session = tmp_path / "session"
    launcher = launcher or [*(python or [sys.executable]), str(RUNNER)]
    cmd = [*launcher, "--session", str(session), *options, "--", str(script), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=timeout)
    return proc, session


def events(session: Path, kind: str | None = None, name: str = "events.jsonl") -> list[dict]:
    lines = (session / name).read_text(encoding="utf-8").splitlines()
    out = [json.loads(line) for line in lines]
    return [e for e in out if kind is None or e["event"] == kind]


def finished(session: Path) -> dict:
    last = events(session)[-1]
    assert last["event"] == "finished", last
    return last


def trace_events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)["traceEvents"]


def spans(trace: list[dict], prefix: str) -> list[tuple[float, float, str]]:
    return sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"]) for e in trace
                  if e.get("ph") == "X" and e.get("name", "").startswith(prefix)
                  and e.get("cat") != "gpu_user_annotation")


def session_of(session: Path) -> Session:
    return open_session(session)


def alive(pid: int) -> bool:
    """The process is there and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def frames(data: bytes) -> list[tuple[dict, bytes]]:
    """The remote agent's follow stream: a JSON header line, then its `n` bytes, per frame."""
    out = []
    while data:
        line, _, data = data.partition(b"\n")
        header = json.loads(line)
        n = int(header.get("n") or 0)
        out.append((header, data[:n]))
        data = data[n:]
    return out


# A script's opening that starts a daemon the classic way (fork, setsid, fork; the middle
# process exits) and waits until it has written its pid to daemon.pid beside the script.
DOUBLE_FORK = '''
import os, sys, time
from pathlib import Path

PIDS = Path(__file__).with_name("daemon.pid")


def _daemonize():
    """The classic double fork: the daemon's parent exits, it leads its own session."""
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            PIDS.write_text(str(os.getpid()))
            time.sleep(600)
        os._exit(0)
    os.waitpid(middle, 0)
    deadline = time.monotonic() + 10
    while not PIDS.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


_daemonize()
'''
