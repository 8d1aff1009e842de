"""The window's state, as a model that views and controllers observe (as napari's evented
models): the open Document, the selected rank (so the Report shown) and the comparison shown.
Only its setters change it; each change goes out as one signal. No widget lives here.

    model = DocumentModel()
    model.sig_report_changed.connect(view.show_report)
    model.set_document(doc)      # sig_document_changed(doc); a view then picks a rank
    model.select_rank(2)         # sig_report_changed(doc.reports[2])
    model.set_comparison(Comparison(before, after, "a.json", "b.json"))
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from stallscope.core.document import Document
from stallscope.core.report import Report


@dataclass(frozen=True)
class Comparison:
    """A pair on show in the Compare tab: the open document's report (before) against the
    first report of a second document (after), with the names the table gives them."""

    before: Report
    after: Report
    before_title: str
    after_title: str
    after_document: Document


class DocumentModel(QObject):
    sig_document_changed = Signal(object)    # Document
    sig_report_changed = Signal(object)      # the selected rank's Report
    sig_comparison_changed = Signal(object)  # Comparison, or None once it is no longer shown

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.document: Document | None = None
        self.rank_index = -1
        self.comparison: Comparison | None = None

    @property
    def report(self) -> Report | None:
        """The selected rank's report; None before a document (or before a rank is picked)."""
        if self.document is None or not 0 <= self.rank_index < len(self.document.reports):
            return None
        return self.document.reports[self.rank_index]

    def set_document(self, document: Document) -> None:
        """A newly opened document; no rank is selected until select_rank (the view that shows
        the document picks the first one to show: the slowest rank of a job)."""
        self.document = document
        self.rank_index = -1
        self.set_comparison(None)
        self.sig_document_changed.emit(document)

    def select_rank(self, index: int) -> None:
        if self.document is None or not 0 <= index < len(self.document.reports):
            return
        if index == self.rank_index:
            return
        self.rank_index = index
        self.sig_report_changed.emit(self.document.reports[index])

    def set_comparison(self, comparison: Comparison | None) -> None:
        if comparison is None and self.comparison is None:
            return
        self.comparison = comparison
        self.sig_comparison_changed.emit(comparison)
