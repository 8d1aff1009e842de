"""The main window's menu bar and the themed icons on its actions.

    actions = build_menus(window)     # {"Open": QAction, "Run script": ..., "Stop": ...}

Every action calls a method of the window (or of one of its controllers); the names are the
keys tests and the start screen's shortcut hints use.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu

from stallscope.gui import theme

if TYPE_CHECKING:
    from stallscope.gui.main_window import MainWindow

ICONS = {"Open": "open", "Open session": "session", "Open folder of ranks": "session",
         "Compare with": "compare",
         "Zoom to fit": "zoom-fit", "Next step": "next", "Previous step": "prev",
         "Run script": "run", "Run demo": "demo", "Stop": "stop",
         "Convert dataset to LMDB": "convert", "Start screen": "recent",
         "About stallscope": "about"}


def build_menus(window: MainWindow) -> dict[str, QAction]:
    actions: dict[str, QAction] = {}

    def add(menu: QMenu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        action = QAction(text, window)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if tip:
            action.setStatusTip(tip)
        action.triggered.connect(lambda _checked=False: slot())
        menu.addAction(action)
        actions[text.rstrip("…").strip()] = action
        return action

    bar = window.menuBar()
    m = bar.addMenu("&File")
    add(m, "Open…", window.choose_trace, QKeySequence.StandardKey.Open,
        "Open a trace file (.json, .json.gz)")
    add(m, "Open session…", window.choose_session, "Ctrl+Shift+O",
        "Open a session, TensorBoard log folder or a folder of ranks' traces")
    add(m, "Open folder of ranks…", window.choose_ranks_folder, "Ctrl+Alt+O",
        "Many ranks of one job: a summary per rank, the straggler table; open any rank in full")
    add(m, "Compare with…", window.choose_compare, "Ctrl+D",
        "Load a second trace as 'after' and compare it with the open one")
    add(m, "Open line profile…", window.choose_line_profile, "Ctrl+Shift+L",
        "Line stats of Dataset.__getitem__: a session folder, .json or .lprof")
    window.recent_menu = m.addMenu("Recent")
    window.recent_menu.aboutToShow.connect(lambda: fill_recent_menu(window))
    m.addSeparator()
    add(m, "Export…", window.choose_export, "Ctrl+E",
        "Save the panels as PNG or the report as Markdown/JSON")
    m.addSeparator()
    add(m, "Quit", window.close, QKeySequence.StandardKey.Quit)

    m = bar.addMenu("&View")
    add(m, "Zoom to fit", window.analysis.fit, "Ctrl+0")
    add(m, "Next step", lambda: window.analysis.step_by(+1), "]")
    add(m, "Previous step", lambda: window.analysis.step_by(-1), "[")
    m.addSeparator()
    add(m, "Start screen", window.show_start, "Ctrl+Shift+H")
    m.addMenu(theme.theme_menu(window))

    m = bar.addMenu("&Run")
    add(m, "Run script…", window.show_run, "Ctrl+R",
        "Run a training script under the profiler and watch it live")
    add(m, "Run demo", window.run_demo, "Ctrl+Shift+R")
    add(m, "Attach to remote run…", window.runs.attach_run, tip="Follow a run on a host over "
        "ssh again (the CLI's or one whose tab was closed), fetching what it wrote meanwhile")
    m.addSeparator()
    stop = add(m, "Stop", window.stop_run, "Shift+F5",
               "End the running script and its DataLoader workers")
    stop.setShortcuts([QKeySequence("Shift+F5"), QKeySequence("Ctrl+.")])
    stop.setEnabled(False)

    m = bar.addMenu("&Tools")
    add(m, "Convert dataset to LMDB…", window.open_lmdb_wizard, "Ctrl+L")

    m = bar.addMenu("&Help")
    add(m, "Getting started", lambda: window.show_help("start"),
        QKeySequence.StandardKey.HelpContents)
    add(m, "Reading the timeline", lambda: window.show_help("timeline"))
    add(m, "Idle causes", lambda: window.show_help("causes"))
    add(m, "Keyboard shortcuts", lambda: window.show_help("keys"), "Ctrl+/")
    m.addSeparator()
    add(m, "About stallscope", window.show_about)
    return actions


def fill_recent_menu(window: MainWindow) -> None:
    """File > Recent, filled from the recent list each time it opens."""
    menu = window.recent_menu
    menu.clear()
    items = window.recent_store.items()
    if not items:
        menu.addAction("(nothing yet)").setEnabled(False)
    for item in items:
        action = menu.addAction(Path(item.path).name)
        action.setToolTip(item.path)
        action.setStatusTip(item.path)
        action.triggered.connect(lambda _c=False, p=item.path: window.open_path(p))


def set_action_icons(actions: dict[str, QAction]) -> None:
    for action_name, icon_name in ICONS.items():
        if action_name in actions:
            actions[action_name].setIcon(theme.icon(icon_name))


def shortcut_hints(actions: dict[str, QAction]) -> dict[str, str]:
    """The start screen's cards show the shortcuts of these actions."""
    keys = {"open_trace": "Open", "open_session": "Open session", "run": "Run script",
            "demo": "Run demo", "convert": "Convert dataset to LMDB"}
    return {key: actions[name].shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            for key, name in keys.items() if name in actions}
