"""The attach line a dropped connection prints works as pasted: it follows the run into the
mirror the run was writing (not a new folder named after the remote one), so only what is
missing arrives and the mirror ends complete. A real sshd on 127.0.0.1 (tests/sshd.py)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from stallscope.core import cli
from stallscope.core.session.reader import open_session

pytestmark = pytest.mark.runner

# three steps, then it waits for the test's go file: the connection drops while it runs
SCRIPT = """\
import os, sys, time, torch
from torch.utils.data import DataLoader, TensorDataset
go = sys.argv[1]
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x,) in enumerate(DataLoader(TensorDataset(torch.randn(80, 4)), batch_size=8)):
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
    print("step", i, flush=True)
    while i == 2 and not os.path.exists(go):
        time.sleep(0.05)
"""


def steps_of(session: Path) -> list[int]:
    return [e["n"] for e in open_session(session).events if e.get("event") == "step"]


def transport(cli_pid: int) -> psutil.Process:
    """The CLI's ssh that streams the session (the `follow` channel)."""
    while True:
        for p in psutil.Process(cli_pid).children(recursive=True):
            try:
                if "follow" in " ".join(p.cmdline()):
                    return p
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.05)


def test_the_printed_attach_line_completes_the_run_s_own_mirror(host, tmp_path, capfd):
    script = tmp_path / "waits.py"
    script.write_text(SCRIPT)
    go = tmp_path / "go"
    mirror = tmp_path / "mirror"
    proc = subprocess.Popen([sys.executable, "-m", "stallscope.core.cli", "run", *host,
                             "--no-analyze", "--no-stop-after-window", "--session", str(mirror),
                             "--", str(script), str(go)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=os.environ)
    while not (mirror / "events.jsonl").exists() or \
            '"step"' not in (mirror / "events.jsonl").read_text():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    os.kill(transport(proc.pid).pid, signal.SIGKILL)  # the laptop's ssh goes away
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "the run goes on there: " in err, err
    line = next(x for x in err.splitlines() if "the run goes on there: " in x)
    words = shlex.split(line.split("the run goes on there: ")[1].removesuffix(" follows it again"))
    remote = Path(json.loads((mirror / "run.json").read_text())["remote"]["session"])
    go.touch()
    while not (remote / ".runner.rc").exists():  # the script goes on there to its end
        time.sleep(0.1)
    assert words[:2] == ["stallscope-cli", "attach"], line
    capfd.readouterr()
    assert cli.main(words[1:]) == 0, capfd.readouterr().err  # exactly as printed
    assert f"into {mirror}" in capfd.readouterr().err
    assert steps_of(mirror) == steps_of(remote) == list(range(10))  # each step once
    for name in ("events.jsonl", "stdout.log", "record.bin", ".runner.out"):
        assert (mirror / name).read_bytes() == (remote / name).read_bytes(), name
    sessions = Path(os.environ["XDG_DATA_HOME"]) / "stallscope" / "sessions"
    assert not sessions.exists() or not list(sessions.iterdir())  # no second copy
