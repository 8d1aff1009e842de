"""File > Export: the plots as PNG (the timeline beside the whole summary panel, without the
toolbar, the hints or the scroll bars; or the window as shown, by choice), the report (or the
comparison) as Markdown/JSON."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QCoreApplication, QPoint
from PySide6.QtGui import QImage, QPainter, QPalette
from PySide6.QtWidgets import QFileDialog, QWidget

from stallscope.core.errors import StallscopeError
from stallscope.core.render.export import comparison_to_markdown, save_report
from stallscope.core.render.perfetto import write_perfetto_job
from stallscope.gui.controllers import WindowPort
from stallscope.gui.workers import JobRunner, JobWorker

PLOTS_FILTER = "PNG image of the plots (*.png)"
WINDOW_FILTER = "PNG image of the window (*.png)"
PERFETTO_FILTER = "Trace with stallscope's tracks, for Perfetto (*.json)"
EXPORT_FILTERS = ";;".join((PLOTS_FILTER, WINDOW_FILTER, "Report as Markdown (*.md)",
                            "Report as JSON (*.json)", PERFETTO_FILTER))
GAP_PX = 8


def choose_export(window: WindowPort) -> None:
    report = window.analysis.report
    if window.document is None or report is None:
        window.show_message("Nothing to export yet: open a trace first.", "info")
        return
    trace = Path(report.trace.path)
    stem = trace.name.split(".")[0]
    path, chosen = QFileDialog.getSaveFileName(
        window.as_widget(), "Export", str(Path(window.dialog_folder()) / f"{stem}-stallscope.png"),
        EXPORT_FILTERS)
    if not path:
        return
    if not Path(path).suffix:
        path += ".md" if "Markdown" in chosen else ".json" if ".json" in chosen else ".png"
    if chosen == PERFETTO_FILTER:
        export_perfetto(window, path)
        return
    export_to(window, path, whole_window=chosen == WINDOW_FILTER)


_jobs: JobRunner | None = None


def export_perfetto(window: WindowPort, path: str) -> JobWorker:
    """The trace's own events plus stallscope's idle/step/advice tracks, written off the GUI
    thread (a trace of hundreds of MB takes seconds)."""
    global _jobs
    if _jobs is None:
        _jobs = JobRunner(QCoreApplication.instance())
    report = window.analysis.report
    assert report is not None  # choose_export() returns early without a report
    worker = JobWorker(lambda cancel: write_perfetto_job(report, path, cancel))
    worker.signals.sig_result.connect(
        lambda _n: window.show_message(f"Saved {path} (open it at ui.perfetto.dev)", "info"))
    worker.signals.sig_error.connect(lambda msg: window.show_message(msg, "error"))
    window.show_message(f"Exporting {Path(path).name} ...", "info")
    return _jobs.start(worker, "perfetto")


def plots_image(window: WindowPort) -> QImage:
    """The current tab's plots: on the analysis page the timeline (legend, lanes, memory)
    beside the whole summary panel (also the part scrolled out of view); another tab as it
    is shown; the start screen as it is."""
    if window.stack.currentWidget() is not window.tabs:
        return (window.as_widget().centralWidget() or window.as_widget()).grab().toImage()
    page = window.tabs.currentWidget()
    if page is not window.analysis:
        return page.grab().toImage()
    timeline = window.analysis.timeline
    parts = [_stacked([timeline.legend, timeline.graphics])]
    summary = window.analysis.summary  # a scroll area: its whole content, not the viewport
    content = summary.widget()
    parts.append((content if content is not None else summary).grab().toImage())
    return _side_by_side(parts, window.as_widget().palette().color(QPalette.ColorRole.Window))


def _stacked(widgets: list[QWidget]) -> QImage:
    shots = [w.grab().toImage() for w in widgets if w.isVisible()]
    image = QImage(max(s.width() for s in shots), sum(s.height() for s in shots) + GAP_PX
                   * (len(shots) - 1), QImage.Format.Format_RGB32)
    image.fill(widgets[0].palette().color(QPalette.ColorRole.Window))
    painter = QPainter(image)
    y = 0
    for shot in shots:
        painter.drawImage(QPoint(0, y), shot)
        y += shot.height() + GAP_PX
    painter.end()
    return image


def _side_by_side(images: list[QImage], background) -> QImage:
    out = QImage(sum(i.width() for i in images) + GAP_PX * (len(images) - 1),
                 max(i.height() for i in images), QImage.Format.Format_RGB32)
    out.fill(background)
    painter = QPainter(out)
    x = 0
    for image in images:
        painter.drawImage(QPoint(x, 0), image)
        x += image.width() + GAP_PX
    painter.end()
    return out


def export_to(window: WindowPort, path: str, whole_window: bool = False) -> bool:
    """PNG of the plots (or of the whole window), or the report as .md/.json. Errors become a
    message."""
    p = Path(path)
    try:
        if p.suffix.lower() == ".png":
            image = window.as_widget().grab().toImage() if whole_window else plots_image(window)
            if not image.save(str(p)):
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
