"""File > Export: the plots as PNG (the timeline beside the whole summary panel, without the
toolbar, the hints or the scroll bars; or the window as shown, by choice), the report (or the
comparison) as Markdown/JSON."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QFileDialog

from stallscope.core.compare import compare_reports
from stallscope.core.errors import StallscopeError
from stallscope.core.render.export import comparison_to_markdown, save_report
from stallscope.core.render.perfetto import session_run_events, write_perfetto_job
from stallscope.gui.controllers import WindowPort
from stallscope.gui.model import Comparison
from stallscope.gui.views.compare import CompareView
from stallscope.gui.workers import JobRunner, JobWorker

PLOTS_FILTER = "PNG image of the plots (*.png)"
WINDOW_FILTER = "PNG image of the window (*.png)"
PERFETTO_FILTER = "Trace with stallscope's tracks, for Perfetto (*.json)"
EXPORT_FILTERS = ";;".join((PLOTS_FILTER, WINDOW_FILTER, "Report as Markdown (*.md)",
                            "Report as JSON (*.json)", PERFETTO_FILTER))


def choose_export(window: WindowPort) -> None:
    report = window.model.report
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
    report = window.model.report
    assert report is not None  # choose_export() returns early without a report
    notes: list[str] = []

    def job(cancel):  # a session's whole run too, read off the GUI thread (as the CLI does)
        run, note = session_run_events(Path(report.trace.path), report)
        notes.append(f" ({note})" if note else "")
        return (yield from write_perfetto_job(report, path, cancel, extra=run))

    worker = JobWorker(job)
    worker.signals.sig_result.connect(lambda _n: window.show_message(
        f"Saved {path} (open it at ui.perfetto.dev){''.join(notes)}", "info"))
    worker.signals.sig_error.connect(lambda msg: window.show_message(msg, "error"))
    window.show_message(f"Exporting {Path(path).name} ...", "info")
    return _jobs.start(worker, "perfetto")


def _comparison_in_front(window: WindowPort) -> Comparison | None:
    """The model's comparison when the Compare page is the one in front."""
    return window.model.comparison if isinstance(window.current_page(), CompareView) else None


def export_to(window: WindowPort, path: str, whole_window: bool = False) -> bool:
    """PNG of the plots (or of the whole window), or the report as .md/.json. Errors become a
    message."""
    p = Path(path)
    try:
        if p.suffix.lower() == ".png":
            image = window.as_widget().grab().toImage() if whole_window else window.page_image()
            if not image.save(str(p)):
                raise StallscopeError(f"{p}: cannot write the PNG")
        elif (comparison := _comparison_in_front(window)) and p.suffix.lower() == ".md":
            p.write_text(comparison_to_markdown(
                compare_reports(comparison.before, comparison.after), comparison.before_title,
                comparison.after_title))
        else:
            if window.model.report is None:
                raise StallscopeError("nothing to export: open a trace first")
            save_report(window.model.report, p)
    except (StallscopeError, OSError) as exc:
        window.show_message(f"Export failed: {exc}", "error")
        return False
    window.show_status(f"Saved {p}", 8000)
    return True
