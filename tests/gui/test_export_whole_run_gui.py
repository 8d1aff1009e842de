"""File > Export for Perfetto of a session's trace adds the whole run (record.bin) as counter
tracks, as `stallscope-cli export SESSION` does, and says so in the message strip."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

from stallscope.core.capture import runner  # noqa: E402
from stallscope.core.session.reader import open_session  # noqa: E402
from stallscope.core.session.record import load_record  # noqa: E402
from stallscope.gui.controllers import export  # noqa: E402

pytestmark = pytest.mark.runner  # the session is recorded by the real runner

SCRIPT = """
import torch
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x in torch.utils.data.DataLoader(torch.randn(24, 8), batch_size=None):
    model(x).sum().backward()
    opt.step()
"""


def test_perfetto_export_of_a_session_trace_adds_the_whole_run(qtbot, window, open_and_wait,
                                                               tmp_path):
    script, session = tmp_path / "train.py", tmp_path / "session"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, runner.__file__, "--session", str(session),
                           "--profile-at", "8", "--active", "2", "--warmup", "1",
                           "--no-stop-after-window", "--", str(script)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    trace = open_session(session).traces()[-1]
    open_and_wait(trace)
    out = tmp_path / "annotated.json"
    shown = []
    window.show_message = lambda text, level="error": shown.append((level, text))
    export.export_perfetto(window, str(out))
    # the result's message (its handler is connected before the job starts; waiting for the
    # worker's signal here would miss a job that had already finished)
    qtbot.waitUntil(lambda: any("Saved" in t for _, t in shown), timeout=120_000)
    saved = next(t for _, t in shown if "Saved" in t)
    assert "whole run: 24 steps from record.bin as counter tracks" in saved
    events = json.loads(out.read_text())["traceEvents"]
    walls = [e for e in events if e.get("ph") == "C" and e["name"] == "run: step time (ms)"]
    rec = load_record(open_session(session))
    assert [e["args"]["mean"] for e in walls] == [round(float(v), 3)
                                                  for v in rec.steps["wall_ms"]]
