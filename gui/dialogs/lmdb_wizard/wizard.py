"""The LMDB wizard: convert an image folder or a Dataset factory into an LMDB, prove the gain.

    wizard = open_lmdb_wizard(parent)            # from the main window (start screen, Tools menu)
    python -m stallscope.gui.dialogs.lmdb_wizard [SRC]   # standalone

Pages: source (preview + detected fields/classes) -> options (destination, preprocessing,
estimated size, free space) -> conversion (progress, samples/s, ETA, Cancel, Resume) -> result
(verification, skipped files, before/after throughput chart, a code snippet to copy).
All work runs in JobWorkers (core/lmdb/); the pages only show what the jobs report.
"""

from __future__ import annotations

import sys
from typing import cast

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QWidget, QWizard

from stallscope.core.lmdb.convert import ConvertResult
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.inspection import SourceInfo
from stallscope.gui.dialogs.lmdb_wizard.convert_page import ConvertPage
from stallscope.gui.dialogs.lmdb_wizard.options_page import OptionsPage
from stallscope.gui.dialogs.lmdb_wizard.result_page import ResultPage
from stallscope.gui.dialogs.lmdb_wizard.source_page import SourcePage
from stallscope.gui.workers import JobRunner


def open_lmdb_wizard(parent: QWidget | None = None, source: str = "") -> QWizard:
    """Show the wizard (non-modal) and return it; it deletes itself when closed."""
    wizard = LMDBWizard(parent, source)
    wizard.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    wizard.show()
    return wizard


class LMDBWizard(QWizard):
    """Holds what the pages share: the inspected source, the options, and the results."""

    def __init__(self, parent: QWidget | None = None, source: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Convert a dataset to LMDB")
        self.setWizardStyle(QWizard.WizardStyle.ModernStyle)
        self.setOption(QWizard.WizardOption.NoBackButtonOnLastPage, True)
        self.setOption(QWizard.WizardOption.NoCancelButtonOnLastPage, True)
        self.setButtonText(QWizard.WizardButton.CommitButton, "Convert")
        self.resize(880, 720)
        self.runner = JobRunner(self)
        self.info: SourceInfo | None = None
        # shadows QDialog.result(), which the wizard never calls
        self.result: ConvertResult | None = None  # type: ignore[assignment]
        self.source_page = SourcePage(self)
        self.options_page = OptionsPage(self)
        self.convert_page = ConvertPage(self)
        self.result_page = ResultPage(self)
        for page in (self.source_page, self.options_page, self.convert_page, self.result_page):
            self.addPage(page)
        if source:
            self.source_page.spec_edit.setText(source)

    # what the options page chose, read by the conversion page
    def preprocess(self) -> Preprocess:
        return self.options_page.preprocess()

    def destination(self) -> str:
        return self.options_page.dst_edit.text().strip()

    def spec(self) -> str:
        return self.source_page.spec()

    def opened_source(self):
        """The source the first page scanned (the options and the conversion reuse it: one
        scan of a folder per wizard run), else the spec."""
        info = self.info
        if info is not None and info.source is not None and self.source_page.isComplete():
            return info.source
        return self.spec()

    def done(self, code: int) -> None:  # closing or cancelling stops every job (work is kept)
        for slot in ("inspect", "estimate", "convert", "verify", "measure"):
            self.runner.cancel(slot)
        super().done(code)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    app = cast(QApplication, QApplication.instance() or QApplication(sys.argv[:1]))
    try:
        from stallscope.gui import theme

        theme.apply_theme(app, theme.saved_mode())
    except Exception:  # noqa: BLE001 - the wizard works unthemed too
        pass
    wizard = open_lmdb_wizard(None, argv[0] if argv else "")
    wizard.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, False)
    return app.exec()

