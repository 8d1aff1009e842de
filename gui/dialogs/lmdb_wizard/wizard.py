"""The LMDB wizard: convert an image folder or a Dataset factory into an LMDB, prove the gain.

    wizard = LMDBWizard(parent, source, jobs=jobs)  # gui/controllers/lmdb makes it with its jobs

Pages: source (preview + detected fields/classes) -> options (destination, preprocessing,
estimated size, free space) -> conversion (progress, samples/s, ETA, Cancel, Resume) -> result
(verification, skipped files, before/after throughput chart, a code snippet to copy).
All work runs as jobs of the wizard's controller (`jobs`: gui/controllers/lmdb.LMDBJobs, its
JobRunner); the pages ask for them and only show what they report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtWidgets import QWidget, QWizard

from stallscope.core.lmdb.convert import ConvertResult
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.inspection import SourceInfo
from stallscope.gui.dialogs.lmdb_wizard.convert_page import ConvertPage
from stallscope.gui.dialogs.lmdb_wizard.options_page import OptionsPage
from stallscope.gui.dialogs.lmdb_wizard.result_page import ResultPage
from stallscope.gui.dialogs.lmdb_wizard.source_page import SourcePage


class WizardJobs(Protocol):
    """What the pages ask of the wizard's controller: each call starts a job with the page's
    handlers (result=, error=, progress=, finished=, cancelled=) connected."""

    def inspect(self, source, pre: Preprocess, **handlers: Callable) -> object: ...

    def estimate(self, source, pre: Preprocess, **handlers: Callable) -> object: ...

    def convert(self, source, dst: str, workers: int, pre: Preprocess,
                **handlers: Callable) -> object: ...

    def verify(self, dst: str, **handlers: Callable) -> object: ...

    def measure(self, dst: str, **handlers: Callable) -> object: ...

    def cancel(self, slot: str | None = None) -> None: ...


class LMDBWizard(QWizard):
    """Holds what the pages share: the inspected source, the options, and the results."""

    def __init__(self, parent: QWidget | None = None, source: str = "", *,
                 jobs: WizardJobs) -> None:
        super().__init__(parent)
        self.setWindowTitle("Convert a dataset to LMDB")
        self.setWizardStyle(QWizard.WizardStyle.ModernStyle)
        self.setOption(QWizard.WizardOption.NoBackButtonOnLastPage, True)
        self.setOption(QWizard.WizardOption.NoCancelButtonOnLastPage, True)
        self.setButtonText(QWizard.WizardButton.CommitButton, "Convert")
        self.resize(880, 720)
        self.jobs = jobs
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
        self.jobs.cancel()
        super().done(code)
