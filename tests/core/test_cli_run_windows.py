"""`stallscope-cli run` hands the repeated-window options to the runner: one trace a window."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.runner  # the CLI in a child process

SCRIPT = """
import torch
from torch.utils.data import DataLoader, TensorDataset
ds = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
m = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(m.parameters(), 0.1)
for epoch in range(3):
    for x, y in DataLoader(ds, batch_size=4):
        opt.zero_grad()
        torch.nn.functional.mse_loss(m(x), y).backward()
        opt.step()
"""


def test_profile_every_reaches_the_runner(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    session = tmp_path / "s"
    proc = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "run", "--session",
                           str(session), "--no-stop-after-window", "--profile-every", "12",
                           "--", str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    traces = sorted((session / "traces").glob("*.pt.trace.json.gz"))
    # 48 steps, a window every 12: four windows, each its own trace.
    assert len(traces) == 4, [t.name for t in traces]
    windows = [json.loads(line).get("window") for line in
               (session / "events.jsonl").read_text().splitlines()
               if json.loads(line).get("event") == "trace_ready"]
    assert len(windows) == 4 and all(w for w in windows)
