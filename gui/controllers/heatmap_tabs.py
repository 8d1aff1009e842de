"""The main window's "Line heatmap" tab: one tab, reused, and what fills it.

- File > Open line profile: a session, a .json, or a .lprof (after asking: it is a pickle);
- a run that wrote its line stats: shown without pulling the tab in front of the run's trace;
- the open document's own session (and a compared one: after vs before), as its job read them
  for the advice (Document.line_stats), dropped again when a document without line stats opens;
- a run whose interpreter lacks line_profiler: the install banner, its button running pip
  with that interpreter once the user has seen the exact command and said yes (the interpreter
  is named by the run's events.jsonl, which may come from someone else's session).

Line stats are read off the GUI thread (by the document's job, or LineStatsController for a
file or a run); this class only decides which tab shows what.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from stallscope.core import lineprof
from stallscope.core.document import Document
from stallscope.gui.controllers.line_stats import LineStats, LineStatsController
from stallscope.gui.dialogs.confirm import confirm_command
from stallscope.gui.views.heatmap import HeatmapView
from stallscope.gui.views.heatmap_files import ask_trust

if TYPE_CHECKING:
    from stallscope.gui.controllers import WindowPort


class HeatmapTabs(QObject):
    def __init__(self, window: WindowPort) -> None:
        super().__init__(window.as_widget())
        self.window = window
        self.view: HeatmapView | None = None
        self.auto = False  # the tab shows the open document's own session (or a run's)
        self.stats = LineStatsController(self)
        self.stats.sig_stats_loaded.connect(self._loaded)
        self.stats.sig_stats_failed.connect(self._failed)
        self.stats.sig_install_finished.connect(self._installed)
        self._titles: dict[str, str] = {}

    # ------------------------------------------------------------------ the tab

    def tab(self, focus: bool = True) -> HeatmapView:
        """The one "Line heatmap" tab, made on first use."""
        if self.view is None or self.view not in self.window.pages():
            self.view = HeatmapView()
            self.view.sig_install_requested.connect(self.install)
        self.window.show_page(self.view, "Line heatmap", focus=focus)
        return self.view

    def show(self, profiles, title: str = "Line heatmap", compare=None,
             focus: bool = True) -> HeatmapView:
        """One Profile or a list of them in the tab; `compare`: the "before" profiles."""
        view = self.tab(focus)
        view.set_profiles(profiles if isinstance(profiles, list) else [profiles], compare)
        self.window.show_page(view, title, focus=focus)
        return view

    def closed(self, widget) -> None:
        """The window closed a tab: forget ours if it was that one."""
        if widget is self.view:
            self.view = None
            self.auto = False

    def _drop_stale(self) -> None:
        if self.auto and self.view is not None:
            self.window.close_page(self.view)
        self.auto = False

    # ------------------------------------------------------------------ what fills it

    def open_line_profile(self, path: str) -> None:
        trust = ask_trust(path, self.window.as_widget())
        if trust is None:
            return
        self._titles["open"] = f"Line heatmap: {Path(path).name}"
        self.stats.load(path, "open", trust_pickle=trust)

    def show_run_line_stats(self, path: str) -> None:
        """A run wrote its line stats (JSON, never a pickle)."""
        self.stats.load(path, "run")

    def show_session_line_stats(self, document: Document,
                                compared: Document | None = None) -> None:
        """The open document's session has line stats: show them without switching tabs; with
        a compared session that has them too, as after-vs-before. They are the ones the
        document's job read for its advice (Document.line_stats): nothing is read again."""
        docs = [d for d in (document, compared) if d is not None]
        failed = next((d.line_stats.error for d in docs if d.line_stats.error), None)
        if failed:
            self._failed("session", failed)
        self._show_session([LineStats(str(d.path), d.line_stats.session, d.line_stats.profiles)
                            for d in docs])

    def show_line_profiler_missing(self, python: str) -> None:
        """A run asked for line stats but its interpreter lacks line_profiler: say so in the
        heatmap tab, with the install button."""
        view = self.tab(focus=False)
        if not view.profiles:
            view.set_profiles([])  # hides the empty function chooser
            view.empty.setText("No line stats for this run: its interpreter lacks "
                               "line_profiler. Install it, then run again.")
        view.show_missing_line_profiler(python or "python")
        self.auto = False
        self.window.show_status(
            f"line_profiler is not installed in {python}: no line heatmap (see the Line "
            "heatmap tab)", 8000)

    def install(self, python: str) -> bool:
        """pip install line_profiler into `python`, after the user confirmed the command."""
        command = lineprof.install_command(python or None)
        text = ("This runs pip with the Python interpreter the run named, to install "
                "line_profiler into it. Run it only if that interpreter is yours.")
        if not confirm_command(self.window.as_widget(), "Install line_profiler?", text, command,
                               button="Install"):
            if self.view is not None and self.view.missing is not None:
                self.view.missing.install_cancelled()
            return False
        return self.stats.install_line_profiler(python)

    # ------------------------------------------------------------------ results

    def _loaded(self, key: str, results: list[LineStats]) -> None:
        if key == "open":
            self.auto = False
            self.show(results[0].profiles, self._titles.pop("open", "Line heatmap"))
        elif key == "run":
            stats = results[0]
            self.show(stats.profiles, f"Line heatmap: {stats.name}", focus=False)
            self.auto = True
        elif key == "session":
            self._show_session(results)

    def _show_session(self, results: list[LineStats]) -> None:
        before = results[0] if results and results[0].profiles else None
        after = results[1] if len(results) > 1 and results[1].profiles else None
        if before is None and after is None:
            self._drop_stale()
            return
        if before is not None and after is not None:
            self.show(after.profiles, f"Line heatmap: {before.name} → {after.name}",
                      compare=before.profiles, focus=False)
        else:
            stats = next(s for s in (before, after) if s is not None)
            self.show(stats.profiles, f"Line heatmap: {stats.name}", focus=False)
        self.auto = True

    def _failed(self, key: str, message: str) -> None:
        what = {"open": "The line profile", "run": "The run's line stats"}.get(
            key, "The session's line stats")
        self.window.add_message(f"{what} could not be read: {message}", "error")

    def _installed(self, ok: bool, detail: str) -> None:
        if self.view is not None:
            self.view.show_install_result(ok, detail)
