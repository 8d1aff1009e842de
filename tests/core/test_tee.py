"""The runner's tee: torch profiler's own notes stay in stdout.log but not on the terminal, and
the script's lines pass whole."""

from __future__ import annotations

import subprocess
import sys

import pytest
from runner_helpers import RUNNER

from stallscope.core.capture.tee import parse_terminal, without_profiler_notes

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess)

NOTES = (b"USDT:2026-12-01 19:23:11 24233:24233 SyncActivityProfilerHandler.cpp:52] "
         b"profiler_start\n"
         b"[W1201 19:23:11.562447433 CPUAllocator.cpp:245] Memory block of unknown size was "
         b"allocated before the profiling started, profiler results will not include the "
         b"deallocation event\n"
         b"USDT:2026-12-01 19:23:11 24233:24233 SyncActivityProfilerHandler.cpp:59] "
         b"profiler_stop\n")


def test_only_the_profilers_notes_are_dropped():
    mine = b"epoch 1 loss 0.25\nUSDT: my own line about profiler_start\n"
    assert without_profiler_notes(NOTES + mine + NOTES) == mine
    assert without_profiler_notes(mine) == mine


def test_the_terminal_spec_names_streams_and_a_size():
    assert parse_terminal("stdout,stderr:120x40") == ({1, 2}, (120, 40))
    assert parse_terminal("stderr") == ({2}, None)
    for bad in ("stdin", "stdout:80", "stdout:axb", ",", "stdout:80x"):
        with pytest.raises(ValueError, match="expected STREAMS"):
            parse_terminal(bad)


SCRIPT = """
import torch
from torch.utils.data import DataLoader, TensorDataset
ds = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
m = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(m.parameters(), 0.1)
for i, (x, y) in enumerate(DataLoader(ds, batch_size=4)):
    opt.zero_grad()
    torch.nn.functional.mse_loss(m(x), y).backward()
    opt.step()
    print(f"step {i}", flush=True)
"""


def test_the_terminal_shows_what_a_plain_run_shows(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    session = tmp_path / "s"
    proc = subprocess.run([sys.executable, str(RUNNER), "--session", str(session),
                           "--no-stop-after-window", "--", str(script)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = proc.stdout + proc.stderr
    assert "step 15" in proc.stdout
    assert "profiler_start" not in shown and "CPUAllocator" not in shown
    log = (session / "stdout.log").read_text()
    assert "step 15" in log and "profiler_start" in log  # kept for the record


# A script whose last output is a line without its end, left open long enough to be passed on
# (PARTIAL_S): the runner's notes after it ("no steps", "trace written") were glued to it, in
# stdout.log and on the terminal ("workingstallscope: no steps were seen ...").
OPEN_LINE = {
    "no steps": "import time\nprint('working', end='', flush=True)\ntime.sleep(0.6)\n",
    "trace written": "import time, torch\nm = torch.nn.Linear(4, 1)\n"
                     "opt = torch.optim.SGD(m.parameters(), 0.1)\n"
                     "for i in range(3):  # the script ends inside the window\n"
                     "    m(torch.randn(2, 4)).sum().backward()\n    opt.step()\n"
                     "print('working', end='', flush=True)\ntime.sleep(0.6)\n",
    "script's stderr open too": "import sys, time\nsys.stderr.write('warn'); sys.stderr.flush()\n"
                                "print('working', end='', flush=True)\ntime.sleep(0.6)\n",
}


@pytest.mark.parametrize("case", sorted(OPEN_LINE))
def test_the_runners_notes_start_a_line_of_their_own(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(OPEN_LINE[case])
    session = tmp_path / "s"
    proc = subprocess.run([sys.executable, str(RUNNER), "--session", str(session),
                           "--no-stop-after-window", "--", str(script)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    log = (session / "stdout.log").read_bytes()
    for shown in (proc.stdout, log):
        assert b"working" in shown and b"stallscope: " in shown, shown
        assert (b"warn" in shown) is ("stderr" in case), shown  # the script's bytes kept whole
        notes = [i for i in range(len(shown)) if shown.startswith(b"stallscope: ", i)]
        assert all(i == 0 or shown[i - 1:i] in (b"\n", b"\r") for i in notes), shown
