"""Before anything named by a session (or a trace, or line stats) runs: the exact command, or the
file to import, shown as plain text, and the user's yes.

    confirm_command(parent, "Install line_profiler?", why, ["/x/python", "-m", "pip", ...])
    confirm_import(parent, "/x/train.py", "JpegFolder")          # the button names the file
    plan = choose_run(parent, script, args, recorded_python, recorded_cwd)  # RunPlan | None
    plan = choose_run(parent, script, args, python, cwd, host="gpu-box")    # on that host

A received session's run.json says what ran on someone else's machine (interpreter, folder,
script, arguments): choose_run shows those as facts and runs with the user's own interpreter
(this app's, or one they pick) in a folder they choose; nothing from the session is used
without being on screen. A session recorded on a host (run.json `remote`) runs there again: the
host, its interpreter and folder are shown first, editable, and the command as ssh runs it.
`answer(dialog)` is the one place the user's answer comes from (tests replace it, and see the
dialog exactly as the user would).

Every string from a file is shown as what it is (core/untrusted.visible): a right-to-left
override, a zero-width space, an ESC or a newline in an argument or a path reads as \u202e,
\u200b, \x1b, \n. The command box grows to hold the whole command (wrapped anywhere), so none
of it is below a fold.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase, QTextLayout, QTextOption
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from stallscope.core.untrusted import visible
from stallscope.gui.dialogs.fields import error_label, with_button
from stallscope.gui.dialogs.run_where import REMOTE_PYTHON, check_host
from stallscope.gui.widgets import plain_label


def answer(dialog: QDialog) -> bool:
    """The user's answer to a confirmation (modal)."""
    return dialog.exec() == QDialog.DialogCode.Accepted


def shown_command(command: list[str]) -> str:
    """A command line as the user must read it: shell-quoted, hidden characters escaped."""
    return visible(shlex.join(command))


class CommandBox(QPlainTextEdit):
    """The exact command, read-only, wrapped anywhere and as tall as its text (up to
    MAX_LINES): nothing of it hides below a fold."""

    MAX_LINES = 40

    def __init__(self, text: str = "") -> None:
        super().__init__(text)
        self.setReadOnly(True)
        self.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.setWordWrapMode(QTextOption.WrapMode.WrapAnywhere)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.textChanged.connect(self.fit)
        self.fit()

    def lines(self) -> int:
        """Screen lines the text takes at the box's width, laid out as the box lays it out."""
        width = self.viewport().width() - 2 * self.document().documentMargin()
        option = QTextOption()
        option.setWrapMode(QTextOption.WrapMode.WrapAnywhere)
        total = 0
        for paragraph in self.toPlainText().split("\n"):
            layout = QTextLayout(paragraph, self.font())
            layout.setTextOption(option)
            layout.beginLayout()
            n = 0
            while (line := layout.createLine()).isValid():
                line.setLineWidth(width)
                n += 1
            layout.endLayout()
            total += max(1, n)
        return total

    def fit(self) -> None:
        lines = min(self.lines(), self.MAX_LINES)
        margin = 2 * self.document().documentMargin() + 2 * self.frameWidth()
        self.setFixedHeight(int(lines * self.fontMetrics().lineSpacing() + margin + 2))

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self.fit()


class ConfirmDialog(QDialog):
    """A question, facts as plain text, the exact command in a read-only box, two buttons."""

    def __init__(self, title: str, text: str, command: str = "",
                 facts: list[tuple[str, str]] | None = None, button: str = "Run",
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setMinimumWidth(560)
        lay = QVBoxLayout(self)
        self.text = plain_label(text)
        self.text.setWordWrap(True)
        lay.addWidget(self.text)
        self.facts = QFormLayout()
        for name, value in facts or []:
            self.add_fact(name, value)
        lay.addLayout(self.facts)
        self.command = CommandBox(command)  # plain text by construction
        self.command.setVisible(bool(command))
        lay.addWidget(self.command)
        self.buttons = QDialogButtonBox()
        self.ok = self.buttons.addButton(button, QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.ok.setAutoDefault(False)  # Enter does not run what the user has not read
        self.buttons.button(QDialogButtonBox.StandardButton.Cancel).setDefault(True)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.extra = QVBoxLayout()
        lay.addLayout(self.extra)
        lay.addWidget(self.buttons)

    def add_fact(self, name: str, value: str) -> None:
        label = plain_label(visible(value))
        label.setWordWrap(True)
        self.facts.addRow(plain_label(name), label)

    def shown_text(self) -> str:
        """Everything the dialog says, as the user reads it (for tests and the log)."""
        parts = [self.windowTitle(), self.text.text()]
        for row in range(self.facts.rowCount()):
            for role in (QFormLayout.ItemRole.LabelRole, QFormLayout.ItemRole.FieldRole):
                item = self.facts.itemAt(row, role)
                widget = item.widget() if item is not None else None
                if isinstance(widget, QLabel):  # the form holds only labels
                    parts.append(widget.text())
        if self.command.isVisibleTo(self):
            parts.append(self.command.toPlainText())
        parts.append(self.ok.text())
        return "\n".join(parts)


def _ask(dialog: QDialog) -> bool:
    try:
        return answer(dialog)
    finally:
        dialog.deleteLater()


def confirm_command(parent: QWidget | None, title: str, text: str, command: list[str],
                    cwd: str = "", button: str = "Run") -> bool:
    """Ask before running `command` (shown exactly, shell-quoted, as plain text)."""
    facts = [("In folder", cwd)] if cwd else []
    return _ask(ConfirmDialog(title, text, shown_command(command), facts, button, parent))


def confirm_import(parent: QWidget | None, file: str, name: str) -> bool:
    """Ask before importing `file` (it runs the file's top-level code) to build `name`."""
    text = (f"Converting to LMDB builds the Dataset with {visible(name)} from {visible(file)}. "
            "Importing the "
            "file runs its top-level code (a script without `if __name__ == \"__main__\":` "
            "runs its training): it is imported in a separate process first, stopped if it "
            "does not finish within a minute.")
    dialog = ConfirmDialog("Import the Dataset's file?", text,
                           facts=[("File", file), ("Dataset", name)],
                           button=f"Import {visible(Path(file).name)}", parent=parent)
    return _ask(dialog)


# ---------------------------------------------------------------------------------------------
# A run of the script (tune, re-run): the user's interpreter, the user's folder


@dataclass
class RunPlan:
    python: str
    cwd: str
    script: str
    args: list[str] = field(default_factory=list)
    host: str = ""  # a remote host: python, cwd and script are that host's paths

    def command(self) -> list[str]:
        return [self.python, self.script, *self.args]


def _there(path: str) -> str:
    """A path on a host as its shell takes it from the launcher: a leading ~/ is the home."""
    return "~/" + shlex.quote(path[2:]) if path.startswith("~/") else shlex.quote(path)


class RunPlanDialog(ConfirmDialog):
    """What will run (interpreter, folder, script, arguments), each chosen here, and what the
    session recorded (shown, never used unless the user picks it)."""

    def __init__(self, script: str, args: list[str], recorded_python: str = "",
                 recorded_cwd: str = "", button: str = "Continue",
                 parent: QWidget | None = None, recorded_script: str = "",
                 host: str = "") -> None:
        if host:
            self._init_remote(script, args, recorded_python, recorded_cwd, button, parent, host)
            return
        text = (f"This runs {visible(Path(script).name)} with your own Python interpreter, in a "
                "folder you choose. Check the command below.")
        facts = [("Script", script), ("Arguments", shlex.join(args) or "(none)")]
        if recorded_python or recorded_cwd:
            text += (" The session that recorded the trace names another machine's interpreter "
                     "and folder; they are not used.")
            facts += [("Session's Python", recorded_python or "-"),
                      ("Session's folder", recorded_cwd or "-")]
        if recorded_script and recorded_script != script:
            facts.append(("Session's script", f"{recorded_script} (not used: not here)"))
        super().__init__("What will run", text, facts=facts, button=button, parent=parent)
        self.plan = RunPlan(sys.executable, str(Path(script).parent), script, list(args))
        self.python_edit = self._chooser("Your Python", self.plan.python, self._choose_python)
        self.cwd_edit = self._chooser("Run in folder", self.plan.cwd, self._choose_cwd)
        self._show_command()

    def _init_remote(self, script: str, args: list[str], python: str, cwd: str, button: str,
                     parent: QWidget | None, host: str) -> None:
        """On the host the session was recorded on: its interpreter and folder (run.json),
        shown and editable, typed paths there (nothing to browse); nothing runs before yes."""
        text = (f"This runs {visible(Path(script).name)} on {visible(host)} over your own ssh, "
                "with the interpreter and in the folder the session recorded there. Check the "
                "host and the command below.")
        facts = [("Host", host), ("Script there", script),
                 ("Arguments", shlex.join(args) or "(none)")]
        super().__init__("What will run", text, facts=facts, button=button, parent=parent)
        self.plan = RunPlan(python or REMOTE_PYTHON, cwd, script, list(args), host)
        self.python_edit = self._chooser(f"Python on {visible(host)}", self.plan.python)
        self.cwd_edit = self._chooser(f"Folder on {visible(host)}", self.plan.cwd)
        self.cwd_edit.setPlaceholderText("your home there")
        self.error = error_label()
        self.extra.addWidget(self.error)
        self._show_command()

    def _chooser(self, name: str, value: str, choose=None) -> QLineEdit:
        edit = QLineEdit(value)
        edit.textChanged.connect(self._edited)
        self.facts.addRow(plain_label(name), with_button(edit, "Choose…", choose) if choose
                          else edit)
        return edit

    def _choose_python(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Python interpreter",
                                              str(Path(self.plan.python).parent))
        if path:
            self.python_edit.setText(path)

    def _choose_cwd(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Run in folder", self.plan.cwd)
        if path:
            self.cwd_edit.setText(path)

    def _edited(self) -> None:
        self.plan.python = self.python_edit.text().strip()
        self.plan.cwd = self.cwd_edit.text().strip()
        self._show_command()

    def _show_command(self) -> None:
        if self.plan.host:
            self._show_remote()
            return
        ok = Path(self.plan.python).is_file() and Path(self.plan.cwd).is_dir()
        self.ok.setEnabled(ok)
        self.command.setPlainText(visible(f"cd {shlex.quote(self.plan.cwd)}") + "\n"
                                  + shown_command(self.plan.command()))
        self.command.setVisible(True)

    def _show_remote(self) -> None:
        plan = self.plan
        try:
            check_host(plan.host)
            problem = "" if plan.python else "name the interpreter on the host"
        except ValueError as exc:
            problem = str(exc)
        self.error.setText(problem)
        self.ok.setEnabled(not problem)
        self.command.setPlainText("\n".join(visible(line) for line in (
            f"ssh {shlex.quote(plan.host)}", f"cd {_there(plan.cwd) if plan.cwd else '~'}",
            " ".join(_there(word) for word in [plan.python, plan.script])
            + "".join(f" {shlex.quote(a)}" for a in plan.args))))
        self.command.setVisible(True)

    def shown_text(self) -> str:
        return "\n".join([super().shown_text(), self.python_edit.text(), self.cwd_edit.text()])


def choose_run(parent: QWidget | None, script: str, args: list[str], recorded_python: str = "",
               recorded_cwd: str = "", button: str = "Continue",
               recorded_script: str = "", host: str = "") -> RunPlan | None:
    """The interpreter and folder to run `script` with, chosen by the user; None on Cancel.
    recorded_*: what the session says ran (shown, not used). host: the session ran there, and
    runs there again: script, recorded_python and recorded_cwd are the host's, shown and
    editable (the user's yes uses them)."""
    dialog = RunPlanDialog(script, args, recorded_python, recorded_cwd, button, parent,
                           recorded_script, host)
    plan = dialog.plan
    return plan if _ask(dialog) else None
