"""Run one view on its own, on real traces: `python -m stallscope.gui.<view> TRACE [...]`.

Every view module's `main` calls `show_view`, which loads and analyses the traces, builds the
widget, and either shows it or saves a PNG (`--screenshot OUT.png`) and exits.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import cast

from PySide6.QtWidgets import QApplication, QWidget

from stallscope.core import document
from stallscope.core.errors import StallscopeError
from stallscope.core.report import Report
from stallscope.gui.widgets import install_plain_text_guard


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
    app = cast(QApplication, QApplication.instance() or QApplication(sys.argv[:1]))
    install_plain_text_guard(app)
    view = build(reports)
    view.resize(*size)
    if args.screenshot:
        view.grab().save(args.screenshot)
        return 0
    view.show()
    return app.exec()
