"""The main window's status bar, permanent part: the passing message and what is open (file,
window length, how busy each device was) side by side, each eliding into the width it gets,
and a load's progress bar (the step it is in) with its Cancel button.

    status = LoadStatus(window.statusBar())
    status.show_report(report, vs="after.json")   # None: "Nothing open"
    status.set_busy(True); status.set_progress(done, total)
    status.cancel_button.clicked.connect(controller.cancel)
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QProgressBar, QPushButton, QSizePolicy, QStatusBar, QWidget

from stallscope.core import units
from stallscope.core.report import Report
from stallscope.gui.widgets import ElidedLabel

DEVICES_SHOWN = 4
# the load job (reading, then analysis) fills this share of the bar; drawing the document,
# which happens after the job ends, is the rest: the bar reaches its end only when it is shown
JOB_SHARE = 0.9
BAR_RANGE = 1000
GAP = 16  # px between the message and what is open


def loaded_text(report: Report | None, vs: str = "") -> str:
    """File, window length, GPU utilization (or no GPU), and what it is compared with."""
    if report is None:
        return "Nothing open"
    lo, hi = report.window
    parts = [Path(report.trace.path).name, f"window {units.duration(hi - lo)}"]
    if report.devices:
        shown = sorted(report.devices)[:DEVICES_SHOWN]
        parts += [f"{report.trace.device_label(dev)} "
                  f"{units.pct(report.devices[dev].utilization)} busy" for dev in shown]
    else:
        parts.append("no GPU")
    if vs:
        parts.append(f"vs {vs}")
    return " · ".join(parts)


def split_width(total: int, left: int, right: int) -> tuple[int, int]:
    """Widths for two texts that want `left` and `right` px in `total`: both whole when they
    fit (the spare to the left); else each keeps what it wants up to half, the other the rest."""
    total = max(total, 0)
    if left + right <= total:
        return total - right, right
    half = total // 2
    if left <= half:
        return left, total - left
    if right <= half:
        return total - right, right
    return total - half, half


def step_text(done: int, total: int) -> str:
    """The progress bar's words: reading and analysing until the job ends, then drawing."""
    if total > 0 and done >= total:
        return "Drawing…"
    return "Reading and analysing… %p%"


class StatusLine(QWidget):
    """The passing message (left) and what is open (right), each elided to its share."""

    def __init__(self) -> None:
        super().__init__()
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.message = ElidedLabel("", self, mode=Qt.TextElideMode.ElideMiddle)
        self.message.setObjectName("statusMessage")
        self.loaded = ElidedLabel("Nothing open", self, mode=Qt.TextElideMode.ElideMiddle)
        self.loaded.setObjectName("loadedLabel")
        self.loaded.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.setMinimumHeight(self.loaded.sizeHint().height())

    def set_message(self, text: str) -> None:
        self.message.setText(text)
        self._place()

    def set_loaded(self, text: str) -> None:
        self.loaded.setText(text)
        self._place()

    def _want(self, label: ElidedLabel) -> int:
        text = label.full_text()
        return label.fontMetrics().horizontalAdvance(text) + 8 if text else 0

    def _place(self) -> None:
        want_left, want_right = self._want(self.message), self._want(self.loaded)
        room = self.width() - (GAP if want_left and want_right else 0)
        left, right = split_width(room, want_left, want_right)
        height = self.height()
        self.message.setGeometry(0, 0, left, height)
        self.loaded.setGeometry(self.width() - right, 0, right, height)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._place()


class LoadStatus(QObject):
    def __init__(self, bar: QStatusBar) -> None:
        super().__init__(bar)
        self.progress = QProgressBar()
        self.progress.setFixedWidth(240)  # room for its words; the line gives way, not it
        self.progress.setRange(0, BAR_RANGE)
        self.progress.setTextVisible(True)
        self.cancel_button = QPushButton("Cancel")
        # the bar's own message area is what its permanent widgets leave, and it cuts a text
        # mid-word; the line shows the message instead, and the bar's own area stays empty
        self.line = StatusLine()
        self.label = self.line.loaded
        self.message = self.line.message
        bar.messageChanged.connect(self.line.set_message)
        bar.addPermanentWidget(self.line, 1)
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.cancel_button)
        self.set_busy(False)

    def show_report(self, report: Report | None, vs: str = "") -> None:
        self.line.set_loaded(loaded_text(report, vs))

    def set_progress(self, done: int, total: int) -> None:
        """The job's (done, total) as its share of the bar, with the step it is in."""
        frac = min(max(done / total, 0.0), 1.0) if total > 0 else 0.0
        self.progress.setValue(round(BAR_RANGE * JOB_SHARE * frac))
        self.progress.setFormat(step_text(done, max(total, 1)))
        if frac >= 1.0:
            # the document is drawn next, in this same turn of the event loop: paint now
            self.progress.repaint()

    def set_busy(self, busy: bool) -> None:
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)
        if busy:
            self.progress.setValue(0)
            self.progress.setFormat(step_text(0, 1))
