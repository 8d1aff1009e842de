"""The fix loop behind the advice cards: "Try it" tunes the DataLoader on the script of the trace
being viewed, "Compare before/after" opens the compare view on the tune's baseline and best
trials, and the LMDB mention opens the wizard with the script's Dataset as the factory source.

    loop = FixLoop(window)               # window: a WindowPort (gui/controllers/__init__.py)
    loop.on_action("try_it", index)      # SummaryPanel.sig_advice_action
    loop.try_it(script=None)             # -> TuneDialog (None when no script was given)
    loop.open_lmdb()                     # -> the LMDB wizard
    loop.compare_sessions(before, after) # baseline as the document, best as "after"

The script comes from the session the trace belongs to (run.json: script, args, cwd, python);
a bare trace asks for it once with a file dialog (remembered for that trace). A session may come
from someone else: before the tune dialog opens, confirm.choose_run shows the script, its
arguments and the session's interpreter and folder as text, and the tune runs with the user's
interpreter in the folder they chose (never the session's, unchosen). A session recorded on a
host (run.json `remote`, ScriptInfo.host) is tuned there: the confirmation names the host and
shows its interpreter (remote.python) and folder (cwd) to edit, and the tune dialog opens with
them preselected (Where: the host). The LMDB route finds the
Dataset by reading the files (no import); importing it waits for a button that names the file,
and happens first in a child process (core.session.factory_probe), never in the app.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QWizard

from stallscope.core.session.factory_probe import Facts, probe
from stallscope.core.tune.script import ScriptInfo, dataset_factory, script_of
from stallscope.gui.controllers import WindowPort
from stallscope.gui.controllers.lmdb import open_lmdb_wizard
from stallscope.gui.controllers.tune import tune_dialog
from stallscope.gui.dialogs.confirm import choose_run, confirm_import
from stallscope.gui.dialogs.tune import TuneDialog
from stallscope.gui.workers import JobRunner, JobWorker

SCRIPT_FILTER = "Python scripts (*.py);;All files (*)"


class FixLoop(QObject):
    sig_tune_opened = Signal(object)    # TuneDialog
    sig_wizard_opened = Signal(object)  # LMDBWizard
    sig_probe_finished = Signal(object)  # factory_probe.Facts of the Dataset's file

    def __init__(self, window: WindowPort) -> None:
        super().__init__(window.as_widget())
        self.window = window
        self.tune_dialog: TuneDialog | None = None
        self.wizard: QWizard | None = None
        self._chosen: dict[str, str] = {}   # trace path -> the script the user gave for it
        self._after: str | None = None      # compare this once the "before" document is shown
        self.runner = JobRunner(self)
        window.sig_document_shown.connect(self._on_document_shown)
        window.controller.sig_load_failed.connect(self._on_load_ended)
        window.controller.sig_load_cancelled.connect(self._on_load_ended)

    # ------------------------------------------------------------------ the script

    def trace_path(self) -> str | None:
        report = self.window.model.report
        if report is not None:
            return str(report.trace.path)
        doc = self.window.document
        return str(doc.path) if doc is not None else None

    def recorded(self) -> ScriptInfo | None:
        """What the session of the trace being viewed says was run (run.json), or None."""
        doc = self.window.document
        return script_of(self.trace_path()) or (script_of(doc.path) if doc is not None else None)

    def script_info(self, ask: bool = True) -> ScriptInfo | None:
        """The script behind the trace being viewed: its session's, else the one given for it
        before, else (ask=True) one chosen now with a file dialog."""
        trace = self.trace_path()
        info = self.recorded()
        if info is not None and (info.is_remote or Path(info.script).is_file()):
            return info  # a host's script is a path there: nothing to look for here
        path = self._chosen.get(trace) if trace else None
        if path is None:
            if not ask:
                return None
            path = self._ask_script(trace, info)
            if not path:
                return None
        if info is not None:  # the session's arguments and Dataset still apply to the script
            return ScriptInfo(path, info.args, info.cwd, info.python, info.session,
                              info.datasets, info.files)
        return ScriptInfo(path)

    def _ask_script(self, trace: str | None, info: ScriptInfo | None) -> str:
        where = (f" (its session names {info.script}, which is not here)"
                 if info is not None else "")
        start = str(Path(info.script).parent) if info is not None else ""
        if info is None and trace:
            start = str(Path(trace).parent)
        self.window.show_status(
            f"Which script recorded this trace?{where}", 8000)
        path, _ = QFileDialog.getOpenFileName(self.window.as_widget(),
                                              "The training script to tune",
                                              start, SCRIPT_FILTER)
        if path and trace:
            self._chosen[trace] = path
        return path

    # ------------------------------------------------------------------ actions

    def on_action(self, action: str, _index: int = -1) -> None:
        if action == "try_it":
            self.try_it()
        elif action == "lmdb":
            self.open_lmdb()

    def try_it(self, script: str | None = None) -> TuneDialog | None:
        """The tune dialog for the script (not started: the user presses Start), once the user
        has seen what will run and chosen the interpreter and folder (confirm.choose_run)."""
        info = ScriptInfo(script) if script else self.script_info()
        if info is None:
            return None
        old = self.tune_dialog
        here = "" if info.is_remote else str(Path(info.script).resolve())
        if old is not None and (old.is_running or (old.host, old.script) == (
                info.host, here or info.script)):
            old.show()
            old.raise_()
            old.activateWindow()
            return old
        recorded = None if script else self.recorded()
        if info.is_remote:  # tuned where it ran: the host's interpreter as typed, its folder
            plan = choose_run(self.window.as_widget(), info.script, info.args,
                              info.remote_python or info.python, info.cwd,
                              button="Open the tune dialog", host=info.host)
        else:
            plan = choose_run(self.window.as_widget(), info.script, info.args,
                              recorded.python if recorded else "",
                              recorded.cwd if recorded else "", button="Open the tune dialog",
                              recorded_script=recorded.script if recorded else "")
        if plan is None:
            return None
        if old is not None:
            old.deleteLater()
        dialog = tune_dialog(plan.script, plan.args, cwd=plan.cwd, python=plan.python,
                             host=plan.host, parent=self.window.as_widget())
        dialog.sig_compare_requested.connect(self.compare_sessions)
        self.tune_dialog = dialog
        dialog.show()
        self.sig_tune_opened.emit(dialog)
        return dialog

    def compare_sessions(self, before: str, after: str) -> None:
        """Open `before` (the baseline trial) as the document, then compare `after` with it."""
        self._after = str(after)
        self.window.show_status(
            f"Comparing {Path(before).name} (as written) with {Path(after).name} (best)…", 8000)
        self.window.open_path(str(before))

    def _on_document_shown(self, _document) -> None:
        after, self._after = self._after, None
        if after is not None:
            self.window.open_compare(after)

    def _on_load_ended(self, role: str, *_args) -> None:
        if role == "main":
            self._after = None  # the baseline did not open: nothing to compare it with

    def shutdown(self) -> None:
        """The window closes: a running tune stops its trial (the finished ones are kept)."""
        dialog = self.tune_dialog
        if dialog is not None and dialog.is_running:
            dialog.cancel()
            dialog.wait()

    def open_lmdb(self):
        """The LMDB wizard. When the script's Dataset factory is found (by reading the files:
        nothing imported), the user is asked with a button naming its file; on yes it is built
        in a child process first (sig_probe_finished) and the wizard opens with it as the
        source once that worked. Returns the wizard when it opened right away, else None."""
        info = self.script_info(ask=False)
        if info is not None and info.is_remote:
            info = None  # its files are the host's: nothing here to read or import
        source = dataset_factory(info.script, info.datasets, info.files) if info else ""
        if not source:
            self.window.show_status(
                "No Dataset found for this trace's script: choose a folder or a factory", 8000)
            return self._open_wizard("")
        file, _, name = source.rpartition(":")
        if not confirm_import(self.window.as_widget(), file, name):
            return self._open_wizard("")
        self.window.show_status(f"Importing {file} in a separate process…")
        worker = JobWorker(lambda _cancel: probe(source))
        worker.signals.sig_result.connect(self._probed)
        self.runner.start(worker, "probe")
        return None

    def _probed(self, facts: Facts) -> None:
        self.sig_probe_finished.emit(facts)
        self.window.show_status(facts.message, 12000)
        self._open_wizard(facts.spec if facts.ok else "")

    def _open_wizard(self, source: str):
        self.wizard = open_lmdb_wizard(self.window.as_widget(), source)
        self.sig_wizard_opened.emit(self.wizard)
        return self.wizard
