"""What the app-wide plain-text guard (gui/widgets.PlainTextGuard, an event filter on the
QApplication) costs: the main window on a real trace, mouse moves over the timeline and a full
repaint of the window after each, with the guard off and on, in alternating rounds.

    .venv/bin/python tests/bench/bench_plain_text_guard.py [--moves 300] [--rounds 3]

Prints the CPU milliseconds per move+repaint without and with the guard, and the events the
filter saw per move. Goal: under 5% more.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT.parent / "shared" / "fixtures" / "traces" / \
    "kineto_nw0_worker0.1623143089861.pt.trace.json.gz"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not FIXTURE.exists():
        print(f"fixture missing: {FIXTURE}")
        return 2
    from PySide6.QtCore import QEvent, QObject, QPointF, Qt
    from PySide6.QtGui import QMouseEvent
    from PySide6.QtWidgets import QApplication

    from stallscope.gui import pyside_workaround
    from stallscope.gui.main_window import MainWindow
    from stallscope.gui.widgets import install_plain_text_guard

    app = QApplication.instance() or QApplication([])
    pyside_workaround.collect_on_gui_thread()
    guard = install_plain_text_guard(app)
    window = MainWindow(persist=False)
    window.resize(1400, 900)
    window.show()
    window.open_path(str(FIXTURE))
    if not window.wait_for_load():
        print("the trace did not load")
        return 2
    viewport = window.analysis.timeline.findChild(QObject, "qt_scrollarea_viewport") or \
        window.analysis.timeline
    w = max(viewport.width() - 20, 100)

    class Count(QObject):
        n = 0

        def eventFilter(self, _obj, _event) -> bool:  # noqa: N802 - Qt API
            Count.n += 1
            return False

    counter = Count()

    def moves() -> float:
        c = time.process_time()
        for i in range(args.moves):
            pos = QPointF(10 + (i * 7) % w, viewport.height() / 2)
            QApplication.sendEvent(viewport, QMouseEvent(
                QEvent.Type.MouseMove, pos, viewport.mapToGlobal(pos), Qt.MouseButton.NoButton,
                Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))
            window.repaint()
            QApplication.processEvents()
        return (time.process_time() - c) / args.moves * 1000

    off, on = [], []
    for _ in range(args.rounds):
        app.removeEventFilter(guard)
        off.append(moves())
        app.installEventFilter(guard)
        on.append(moves())
    app.installEventFilter(counter)
    moves()
    app.removeEventFilter(counter)
    per_move = Count.n / args.moves
    a, b = statistics.median(off), statistics.median(on)
    print(f"move + repaint, CPU ms: without the guard {a:.2f}, with it {b:.2f} "
          f"({(b - a) / a * 100:+.1f}%); the filter saw {per_move:.0f} events per move")
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
