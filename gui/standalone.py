"""Run one view or dialog on its own: `python -m stallscope.gui.<view> TRACE [...]`.

Every view module's `main` calls `show_view`, which loads and analyses the traces, builds the
widget, and either shows it or saves a PNG (`--screenshot OUT.png`) and exits. A standalone
dialog (the tune dialog) starts its application with `standalone_app` and ends it with
`run_until_closed`: themed and guarded as the app is, its widgets torn down before Python's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import cast

from PySide6.QtCore import QCoreApplication, QEvent
from PySide6.QtWidgets import QApplication, QWidget

from stallscope.core import document
from stallscope.core.errors import StallscopeError
from stallscope.core.report import Report
from stallscope.gui import pyside_workaround, theme
from stallscope.gui.widgets import install_plain_text_guard


def standalone_app(screenshot: bool = False) -> QApplication:
    """The QApplication as gui/app.py sets it up: names from files as plain text, the cycle
    collector on the GUI thread, the bundled fonts and the user's theme (light for a PNG)."""
    app = cast(QApplication, QApplication.instance() or QApplication(sys.argv[:1]))
    pyside_workaround.collect_on_gui_thread()
    install_plain_text_guard(app)
    app.setApplicationName("stallscope")
    app.setOrganizationName("stallscope")
    theme.apply_theme(app, "light" if screenshot else theme.saved_mode())
    QApplication.setWindowIcon(theme.app_icon())
    return app


def run_until_closed(app: QApplication, widget: QWidget) -> int:
    """Show `widget`, run the event loop, then delete the widget while the application still
    exists: left to interpreter shutdown, a pyqtgraph scene's objects go after the
    QApplication ("shared QObject was deleted directly", and a crash)."""
    widget.show()
    code = app.exec()
    widget.close()
    widget.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    return code


def show_view(build: Callable[[list[Report]], QWidget], description: str,
              traces: Sequence[str] = ("trace",), size: tuple[int, int] = (1400, 900),
              argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=description)
    for name in traces:
        parser.add_argument(name)
    parser.add_argument("--screenshot", metavar="OUT.png", help="save a PNG and exit")
    args = parser.parse_args(argv)
    try:
        reports = [document.analyze_path(getattr(args, name)) for name in traces]
    except StallscopeError as exc:
        print(f"stallscope: error: {exc}", file=sys.stderr)
        return 2
    app = standalone_app(screenshot=bool(args.screenshot))
    view = build(reports)
    view.resize(*size)
    if args.screenshot:
        view.grab().save(args.screenshot)
        view.deleteLater()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        return 0
    return run_until_closed(app, view)
