"""The main window's "Compare" tab: the open document (before) against a second one (after),
loaded in the "compare" role.

    compares = CompareTab(window)      # window: a WindowPort
    compares.show(after_document)      # the pair in the model: the window shows its tab
    compares.vs_title()                # what the status bar names beside the open document
"""

from __future__ import annotations

from PySide6.QtCore import QObject

from stallscope.core.document import Document
from stallscope.core.report import Report
from stallscope.core.session.reader import is_session
from stallscope.gui.controllers import WindowPort
from stallscope.gui.model import Comparison


def report_title(doc: Document, report: Report) -> str:
    """A report's name in the compare table: its trace, with its session folder when the
    document is a session (tune trials' traces share a name) and its rank when it has many."""
    name = report.trace.path.name
    if doc.path.is_dir() and is_session(doc.path):
        name = f"{doc.path.name}/{name}"
    if doc.multi_rank:
        name += f" ({doc.labels[doc.reports.index(report)]})"
    return name


class CompareTab(QObject):
    """Puts the pair in the model (gui/model.Comparison); the window shows what the model
    holds."""

    def __init__(self, window: WindowPort) -> None:
        super().__init__(window.as_widget())
        self.window = window

    def show(self, after_doc: Document) -> None:
        window, model = self.window, self.window.model
        before, document = model.report, model.document
        if before is None or document is None:
            return  # only reached once both documents are loaded
        after = after_doc.reports[0]
        model.set_comparison(Comparison(before, after, report_title(document, before),
                                        report_title(after_doc, after), after_doc))
        window.show_status(f"Comparing with {after_doc.title}", 8000)
        window.heatmaps.show_session_line_stats(document, after_doc)
        window.sig_compare_shown.emit((before, after))

    def vs_title(self) -> str:
        comparison = self.window.model.comparison
        return comparison.after_document.title if comparison is not None else ""
