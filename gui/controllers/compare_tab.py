"""The main window's "Compare" tab: the open document (before) against a second one (after),
loaded in the "compare" role.

    compares = CompareTab(window)      # window: a WindowPort
    compares.show(after_document)      # the pair in the Compare tab (sig_compare_shown)
    compares.vs_title()                # what the status bar names beside the open document
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from stallscope.core.document import Document
from stallscope.core.report import Report
from stallscope.core.session.reader import is_session
from stallscope.gui.controllers import WindowPort


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
    def __init__(self, window: WindowPort) -> None:
        super().__init__(window.as_widget())
        self.window = window
        self.after: Document | None = None
        self.showing = False  # the tab shows window.document against self.after

    def show(self, after_doc: Document) -> None:
        self.after = after_doc
        window = self.window
        before = window.analysis.report
        if before is None or window.document is None:
            return  # only reached once both documents are loaded
        after = after_doc.reports[0]
        window.compare.set_reports(before, after, report_title(window.document, before),
                              report_title(after_doc, after))
        if window.tabs.indexOf(window.compare) < 0:
            window.tabs.addTab(window.compare, "Compare")
        self.showing = True
        window.stack.setCurrentWidget(window.tabs)
        window.tabs.setCurrentWidget(window.compare)
        window.messages.hide()
        window.status_bar.showMessage(f"Comparing with {after_doc.title}", 8000)
        window.show_loaded()
        window.heatmaps.show_session_line_stats(window.document, after_doc)
        window.sig_compare_shown.emit((before, after))

    def vs_title(self) -> str:
        return self.after.title if self.showing and self.after is not None else ""

    def closed(self, widget: QWidget) -> None:
        """The window closed a tab: the pair is no longer shown if it was ours."""
        if widget is self.window.compare:
            self.showing = False
            self.window.show_loaded()
