"""The main window's status bar, permanent part: what is open (file, window length, how busy
each device was), and a load's progress bar with its Cancel button.

    status = LoadStatus(window.statusBar())
    status.show_report(report, vs="after.json")   # None: "Nothing open"
    status.set_busy(True); status.set_progress(done, total)
    status.cancel_button.clicked.connect(controller.cancel)
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QProgressBar, QPushButton, QStatusBar

from stallscope.core import units
from stallscope.core.report import Report
from stallscope.gui.widgets import ElidedLabel

DEVICES_SHOWN = 4


def loaded_text(report: Report | None, vs: str = "") -> str:
    """File, window length, GPU utilization (or no GPU), and what it is compared with."""
    if report is None:
        return "Nothing open"
    lo, hi = report.window
    parts = [Path(report.trace.path).name, f"window {units.duration(hi - lo)}"]
    if report.devices:
        shown = sorted(report.devices)[:DEVICES_SHOWN]
        parts += [f"{report.trace.device_label(dev)} "
                  f"{units.pct(report.devices[dev].utilization, 0)} busy" for dev in shown]
    else:
        parts.append("no GPU")
    if vs:
        parts.append(f"vs {vs}")
    return " · ".join(parts)


class LoadStatus(QObject):
    def __init__(self, bar: QStatusBar) -> None:
        super().__init__(bar)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(260)
        self.progress.setRange(0, 1000)
        self.cancel_button = QPushButton("Cancel")
        # what is open, kept while transient messages come and go on the left; it elides
        # (whole text in its tooltip) so the two never overlap
        self.label = ElidedLabel("Nothing open", mode=Qt.TextElideMode.ElideMiddle)
        self.label.setObjectName("loadedLabel")
        self.label.setMaximumWidth(560)
        self.label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        bar.addPermanentWidget(self.label, 1)
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.cancel_button)
        self.set_busy(False)

    def show_report(self, report: Report | None, vs: str = "") -> None:
        self.label.setText(loaded_text(report, vs))

    def set_progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)

    def set_busy(self, busy: bool) -> None:
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)
        if busy:
            self.progress.setValue(0)
