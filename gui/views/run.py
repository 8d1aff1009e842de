"""A run, live: step time and data-wait per step, memory, the script's console, Stop.

    view = RunView()
    view.bind(controller)                # a gui.controllers.run.RunController: it runs the
                                         # script or replays a session; the view draws it
    view.sig_open_trace.connect(...)     # "Open trace", or a profiled window clicked in the
                                         # whole-run chart: that trace's path

The view holds layout only: what it shows comes from the controller's signals, Stop asks the
controller, and closing the view (or deleting its tab) stops the controller's run first.
Standalone: `python -m stallscope.gui.controllers.run [SESSION | --demo]` (it needs its
controller, and views never import controllers).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from stallscope.core.render.run_text import steady_text
from stallscope.core.session.events import StepColumns
from stallscope.core.session.record import Record
from stallscope.core.session.steady import Steady
from stallscope.gui.colors import MUTED_TEXT
from stallscope.gui.views.run_charts import RunCharts
from stallscope.gui.views.run_console import RunConsole, note_color, stderr_color
from stallscope.gui.views.run_whole import WholeRunPanel
from stallscope.gui.widgets import plain_label

if TYPE_CHECKING:
    from stallscope.gui.controllers.run import RunController

__all__ = ["RunView"]

MB = 1 << 20
WHOLE_RUN_FIRST = 500  # a replayed run of more steps opens on its Whole run tab
PHASES = {"wait": " (before profiling)", "warmup": " (profiler warming up)",
          "active": " (profiling)", "between": " (between profiling windows)", "done": ""}


class RunView(QWidget):
    sig_open_trace = Signal(str)   # "Open trace" (the newest), or a window clicked in Whole run
    sig_closing = Signal()         # the view closes or is deleted: its run must end first

    controller: RunController      # set by bind()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.traces: list[str] = []
        self.steps = 0  # steps drawn so far
        self._steps: StepColumns | None = None  # the header's figures (_show_figures)
        self._steady: Steady | None = None
        self._build()

    def bind(self, controller: RunController) -> None:
        """Draw what `controller` reports; Stop and closing go to it."""
        self.controller = c = controller
        c.sig_opened.connect(self._opened)
        c.sig_status.connect(self._set_status)
        c.sig_output.connect(self.console.feed)
        c.sig_console.connect(lambda text, level: self.console.append(text, _color(level)))
        c.sig_output_ended.connect(self.console.flush)
        c.sig_steps.connect(self._draw_steps)
        c.sig_record.connect(self._show_record)
        c.sig_replayed.connect(self._replayed)
        c.sig_trace_ready.connect(self._trace_written)
        c.sig_stoppable.connect(self.stop_button.setEnabled)
        c.sig_reconnectable.connect(self.reconnect_button.setVisible)
        self.reconnect_button.clicked.connect(c.reconnect)
        self.stop_button.clicked.connect(c.stop)
        self.sig_closing.connect(c.shutdown)

    # ------------------------------------------------------------------ layout
    def _build(self) -> None:
        self.title = plain_label("No run yet")  # names from the session: never markup
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.2)
        font.setBold(True)
        self.title.setFont(font)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status = plain_label()
        self.status.setWordWrap(True)
        self.figures = plain_label()
        self.figures.setWordWrap(True)
        self.figures.setStyleSheet(f"color: {MUTED_TEXT};")
        self.session_label = plain_label()
        self.session_label.setStyleSheet(f"color: {MUTED_TEXT};")
        self.session_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("End the script and every process it started")
        self.stop_button.setEnabled(False)
        self.reconnect_button = QPushButton("Reconnect")
        self.reconnect_button.setToolTip("Follow the run on its host again: what it wrote "
                                         "meanwhile is fetched, nothing twice")
        self.reconnect_button.setVisible(False)
        self.open_button = QPushButton("Open trace")
        self.open_button.setEnabled(False)
        self.open_button.clicked.connect(self._open_last_trace)

        head = QHBoxLayout()
        text = QVBoxLayout()
        text.addWidget(self.title)
        text.addWidget(self.status)
        text.addWidget(self.figures)
        head.addLayout(text, 1)
        head.addWidget(self.reconnect_button, 0, Qt.AlignmentFlag.AlignTop)
        head.addWidget(self.open_button, 0, Qt.AlignmentFlag.AlignTop)
        head.addWidget(self.stop_button, 0, Qt.AlignmentFlag.AlignTop)

        self.charts = RunCharts()
        self.whole = WholeRunPanel()
        self.whole.sig_trace_clicked.connect(self.sig_open_trace)
        self.chart_tabs = QTabWidget()
        self.chart_tabs.setDocumentMode(True)
        self.chart_tabs.addTab(self.charts, "Steps")
        self.chart_tabs.addTab(self.whole, "Whole run")
        self.chart_tabs.setTabToolTip(1, "Every step of the run: step time, data wait, epoch "
                                         "starts, profiled windows and the run's stalls")

        self.console = RunConsole()

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.chart_tabs)
        split.addWidget(self.console)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)

        layout = QVBoxLayout(self)
        layout.addLayout(head)
        layout.addWidget(self.session_label)
        layout.addWidget(split, 1)

    # ------------------------------------------------------------------ drawing
    def _opened(self, title: str, session: Path) -> None:
        """A new run or replay: everything of the previous one goes."""
        self.traces = []
        self.steps = 0
        self.title.setText(title)
        self.session_label.setText(f"Session: {session}")
        self.console.reset()
        self.figures.setText("")
        self.open_button.setEnabled(False)
        self.charts.reset()
        self.whole.report = None
        self._steps = self._steady = None

    def _set_status(self, text: str, level: str = "") -> None:
        color = _color(level)
        self.status.setStyleSheet(f"color: {color};" if color else "")
        self.status.setText(text)

    def _trace_written(self, path: str) -> None:
        self.traces.append(path)
        self.open_button.setEnabled(True)

    def _open_last_trace(self) -> None:
        if self.traces:
            self.sig_open_trace.emit(self.traces[-1])

    def _draw_steps(self, s: StepColumns, steady: Steady | None) -> None:
        self.steps = s.n
        self.charts.draw(s)
        self._steps = s
        self._steady = steady
        self._show_figures()

    def _show_record(self, record: Record, session: Path | None = None) -> None:
        self.whole.show_record(record, session)
        self._show_figures()

    def _show_figures(self) -> None:
        """The header: the step the run is at, then the steady figures of record.bin (every
        step) once it has been read, else of the step events so far."""
        s, report = self._steps, self.whole.report
        if report is not None:
            figures = steady_text(report)
        elif self._steady is not None:
            figures = self._steady.short_text + ("" if self._steady.reached
                                                 else " (not steady yet)")
        else:
            figures = "not steady yet"
        last = int(s["n"][-1]) if s is not None and s.n and np.isfinite(s["n"][-1]) else None
        if report is not None and (last is None or report.steps - 1 > last):
            last, phase = report.steps - 1, ""  # step events thin out in a long run
        else:
            phase = PHASES.get(s.last_phase, "") if s is not None else ""
        rss = s["rss"][-1] if s is not None and s.n else float("nan")
        self.figures.setText((f"step {last:,}{phase} · " if last is not None else "") + figures
                             + (f" · RSS {rss / MB:.0f} MB" if np.isfinite(rss) else ""))

    def _replayed(self) -> None:
        """A replayed run with stalls (or too many steps to read per step) opens on Whole run."""
        report = self.whole.report
        if report is not None and (report.stalls or self.steps > WHOLE_RUN_FIRST):
            self.chart_tabs.setCurrentWidget(self.whole)

    # ------------------------------------------------------------------ lifetime
    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        self.sig_closing.emit()
        super().closeEvent(event)

    def event(self, e: QEvent) -> bool:
        if e.type() == QEvent.Type.DeferredDelete:  # a closed tab is deleteLater()'d
            self.sig_closing.emit()
        return super().event(e)


def _color(level: str) -> str | None:
    """The colour of a controller's level ("", "note", "error"), in the current theme."""
    return {"note": note_color, "error": stderr_color}.get(level, lambda: None)()
