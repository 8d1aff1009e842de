"""File > Export: the visible panels as PNG, the report (or the comparison) as Markdown/JSON."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from stallscope.core.errors import StallscopeError
from stallscope.core.render.export import comparison_to_markdown, save_report

EXPORT_FILTERS = ("PNG image of the panels (*.png);;Report as Markdown (*.md);;"
                  "Report as JSON (*.json)")


def choose_export(window) -> None:
    if window.document is None:
        window.show_message("Nothing to export yet: open a trace first.", "info")
        return
    stem = Path(window.analysis.report.trace.path).name.split(".")[0]
    path, chosen = QFileDialog.getSaveFileName(window, "Export", f"{stem}-stallscope.png",
                                               EXPORT_FILTERS)
    if path:
        if not Path(path).suffix:
            path += ".md" if "Markdown" in chosen else ".json" if "JSON" in chosen else ".png"
        export_to(window, path)


def export_to(window, path: str) -> bool:
    """PNG of the visible panels, or the report as .md/.json. Errors become a message."""
    p = Path(path)
    try:
        if p.suffix.lower() == ".png":
            target = window.tabs.currentWidget() if window.stack.currentWidget() is window.tabs \
                else window.centralWidget()
            if not target.grab().save(str(p)):
                raise StallscopeError(f"{p}: cannot write the PNG")
        elif window.tabs.currentWidget() is window.compare and p.suffix.lower() == ".md":
            compare = window.compare
            p.write_text(comparison_to_markdown(compare.metrics, compare.before.title.full_text(),
                                                compare.after.title.full_text()))
        else:
            if window.analysis.report is None:
                raise StallscopeError("nothing to export: open a trace first")
            save_report(window.analysis.report, p)
    except (StallscopeError, OSError) as exc:
        window.show_message(f"Export failed: {exc}", "error")
        return False
    window.status_bar.showMessage(f"Saved {p}", 8000)
    return True
