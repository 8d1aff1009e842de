"""The tune dialog on real trials of a tiny script: the live chart and table fill trial by
trial, the best is marked, the line to change and "Compare before/after" come at the end;
Cancel stops the running trial and keeps the finished ones."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import psutil
from PySide6.QtCore import Qt
from shots import save_shot

from stallscope.core.tune import load_result
from stallscope.gui.colors import BETTER_COLOR
from stallscope.gui.dialogs.tune import TuneDialog

# Data sleeps 60 ms a step, compute 40 ms: one worker overlaps them whatever the machine's load.
SLEEPY = """
import time, torch
from torch.utils.data import DataLoader, Dataset

class Sleepy(Dataset):
    def __len__(self):
        return 400
    def __getitem__(self, i):
        time.sleep(0.0075)
        return torch.zeros(4), torch.zeros(1)

loader = DataLoader(Sleepy(), batch_size=8)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(COMPUTE)
"""


def script(tmp_path: Path, compute_s: float) -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(SLEEPY).replace("COMPUTE", str(compute_s)))
    return path


def test_tune_dialog_fills_live_and_offers_the_compare(qtbot, tmp_path):
    dialog = TuneDialog(str(script(tmp_path, 0.04)), out=str(tmp_path / "tune"), max_workers=2,
                        max_trials=4)
    qtbot.addWidget(dialog)
    dialog.resize(900, 760)
    dialog.show()
    seen_rows = []
    dialog.bridge.sig_trial.connect(lambda *_: seen_rows.append(dialog.table.rowCount()))
    with qtbot.waitSignal(dialog.sig_tune_ended, timeout=180_000) as ended:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
        assert dialog.is_running and not dialog.start_button.isEnabled()
    assert ended.args == ["done"]
    assert seen_rows == [1, 2, 3, 4]  # one row per trial, as each finished
    # the search (1-2), then the leader and the script as written again (3-4, leader first)
    assert [dialog.table.item(r, 1).text() for r in range(4)] == [
        "as written", "num_workers=1", "num_workers=1", "as written"]
    assert dialog.table.item(1, 0).text() == "2 ★"
    x = dialog.chart.steps.opts["x"]
    heights = dialog.chart.steps.opts["height"]
    assert list(x) == [1.0, 2.0, 3.0, 4.0] and heights[1] < 0.75 * heights[0]
    assert heights[2] < 0.75 * heights[3]
    assert np.allclose(heights, [t.step_ms for t in dialog.trials])
    assert dialog.chart.steps.opts["brushes"][1].name() == BETTER_COLOR
    result = load_result(tmp_path / "tune")
    assert result.decision == "adopt"
    assert f"faster by {result.interval}" in dialog.verdict.text()
    assert " over 2 pairs " in dialog.verdict.text()
    assert dialog.verdict.text().endswith("note: stopped at the limit of 4 trials (the last 2 "
                                          "repeat the leader against the noise)")
    assert dialog.verdict.height() >= 2 * dialog.verdict.fontMetrics().lineSpacing()
    line = dialog.change_edit.text()
    assert line.startswith("train.py:") and line.endswith(
        ": DataLoader(...) -> num_workers=1")
    assert dialog.copy_button.isEnabled() and dialog.compare_button.isEnabled()
    with qtbot.waitSignal(dialog.sig_compare_requested) as pair:
        qtbot.mouseClick(dialog.compare_button, Qt.MouseButton.LeftButton)
    before, after = pair.args
    assert (before, after) == result.sessions  # the two sessions the claim rests on
    assert (Path(after) / "events.jsonl").is_file()
    assert result.best == 2
    image = save_shot(dialog, "tune_dialog").toImage()
    colors = {image.pixelColor(x, y).name() for x in range(0, image.width(), 7)
              for y in range(0, image.height(), 7)}
    assert BETTER_COLOR in colors  # the best bar is drawn


def test_cancel_stops_the_running_trial_and_keeps_the_finished(qtbot, tmp_path):
    dialog = TuneDialog(str(script(tmp_path, 0.4)), out=str(tmp_path / "tune"), max_workers=2)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.start()
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 1, timeout=120_000)
    second = tmp_path / "tune" / "02-num_workers=1"
    qtbot.waitUntil(lambda: (second / "run.json").is_file(), timeout=60_000)
    runner_pid = json.loads((second / "run.json").read_text())["pid"]
    with qtbot.waitSignal(dialog.sig_tune_ended, timeout=60_000) as ended:
        qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    assert ended.args == ["cancelled"]
    assert dialog.status.text() == f"Cancelled: 1 finished trial kept in {tmp_path / 'tune'}"
    result = load_result(tmp_path / "tune")
    assert result.stopped == "cancelled"
    assert [(t.index, t.status) for t in result.trials] == [(1, "ok"), (2, "interrupted")]
    assert not psutil.pid_exists(runner_pid) or psutil.Process(runner_pid).status() == "zombie"
    assert dialog.start_button.isEnabled() and not dialog.cancel_button.isEnabled()
