"""A run, live: step time and data-wait per step, memory, the script's console, Stop.

    view = RunView(request)              # starts the run (RunView() + view.start(request) too)
    view.sig_trace_ready.connect(...)    # absolute path of each trace as it is written
    view.sig_run_finished.connect(...)   # the run's exit code

The script runs in a QProcess (separate stdout/stderr, an explicit environment) through the
runner by file path; events.jsonl is followed on a timer. `RunView.replay(session)` shows a
finished session the same way.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
from PySide6.QtCore import (
    QCoreApplication,
    QEvent,
    QProcess,
    QProcessEnvironment,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from stallscope.core.capture.layout import DATALOADER
from stallscope.core.errors import StallscopeError
from stallscope.core.session.events import (
    Finished,
    LineprofReady,
    Message,
    Started,
    StepColumns,
    StepEvent,
    TraceReady,
    typed,
)
from stallscope.core.session.reader import EventFollower, open_session, resolve_path, write_finished
from stallscope.core.session.record import RECORD_EVENTS
from stallscope.core.session.steady import queued_batches
from stallscope.gui.colors import MUTED_TEXT
from stallscope.gui.run_request import RunRequest, demo_request
from stallscope.gui.views.run_charts import RunCharts
from stallscope.gui.views.run_console import RunConsole, note_color, stderr_color
from stallscope.gui.views.run_whole import WholeRunPanel

__all__ = ["RunView", "RunRequest", "demo_request"]

POLL_MS = 200
RECORD_EVERY = 15  # polls: the whole-run record is re-read every 3 s while the run goes on
STOP_GRACE_MS = 5000
MB = 1 << 20


class RunView(QWidget):
    sig_trace_ready = Signal(str)
    sig_lineprof_ready = Signal(str)
    sig_run_finished = Signal(int)
    sig_status_changed = Signal(str)
    sig_lineprof_missing = Signal(str)  # the run's python, which lacks line_profiler
    sig_open_trace = Signal(str)        # a profiled window clicked in the whole-run chart

    def __init__(self, request: RunRequest | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.request: RunRequest | None = None
        self.session: Path | None = None
        self.process: QProcess | None = None
        self.follower: EventFollower | None = None
        self.series = StepColumns()
        self.loaders: list[dict] = []  # the run's dataloader events (rank 0): workers queued
        self.record_events: list[dict] = []  # epoch, save, tail, trace_ready: the record's
        self.traces: list[str] = []
        self.end: Finished | None = None  # the run's typed finished record
        self.exit_code: int | None = None
        self._stopping = False
        self._tree: list = []
        self._pid = 0
        self._polls = 0
        self._timer = QTimer(self, interval=POLL_MS)
        self._timer.timeout.connect(self.poll)
        self._kill_timer = QTimer(self, singleShot=True, interval=STOP_GRACE_MS)
        self._kill_timer.timeout.connect(self._kill_tree)
        self._build()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        if request is not None:
            # Start once the caller has connected its signals.
            QTimer.singleShot(0, lambda: self.start(request))

    # ------------------------------------------------------------------ layout
    def _build(self) -> None:
        self.title = QLabel("No run yet")
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.2)
        font.setBold(True)
        self.title.setFont(font)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.figures = QLabel("")
        self.figures.setStyleSheet(f"color: {MUTED_TEXT};")
        self.session_label = QLabel("")
        self.session_label.setStyleSheet(f"color: {MUTED_TEXT};")
        self.session_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("End the script and every process it started")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop)
        self.open_button = QPushButton("Open trace")
        self.open_button.setEnabled(False)
        self.open_button.clicked.connect(self._open_last_trace)

        head = QHBoxLayout()
        text = QVBoxLayout()
        text.addWidget(self.title)
        text.addWidget(self.status)
        text.addWidget(self.figures)
        head.addLayout(text, 1)
        head.addWidget(self.open_button, 0, Qt.AlignmentFlag.AlignTop)
        head.addWidget(self.stop_button, 0, Qt.AlignmentFlag.AlignTop)

        self.charts = RunCharts()
        self.whole = WholeRunPanel()
        self.whole.sig_trace_clicked.connect(self.sig_open_trace)
        self.chart_tabs = QTabWidget()
        self.chart_tabs.setDocumentMode(True)
        self.chart_tabs.addTab(self.charts, "Steps")
        self.chart_tabs.addTab(self.whole, "Whole run")
        self.chart_tabs.setTabToolTip(1, "Every step of the run: step time, data wait, epoch "
                                         "starts, profiled windows and the run's stalls")

        self.console = RunConsole()

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.chart_tabs)
        split.addWidget(self.console)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)

        layout = QVBoxLayout(self)
        layout.addLayout(head)
        layout.addWidget(self.session_label)
        layout.addWidget(split, 1)

    @property
    def finished_record(self) -> dict | None:
        """The finished record's main fields as a dict (rc, reason, steps, warning)."""
        e = self.end
        return None if e is None else {"rc": e.rc, "reason": e.reason, "steps": e.steps,
                                       "warning": e.warning}

    # ------------------------------------------------------------------ running
    @property
    def is_running(self) -> bool:
        return self._running_process() is not None

    def _running_process(self) -> QProcess | None:
        """The runner's QProcess while it runs, else None (a typed form of is_running)."""
        proc = self.process
        if (proc is not None and isValid(proc)
                and proc.state() != QProcess.ProcessState.NotRunning):
            return proc
        return None

    def start(self, request: RunRequest) -> Path | None:
        if self.is_running:
            raise RuntimeError("a run is already going on in this view")
        self._reset()
        self.request = request
        self.session = request.new_session_dir()
        program, arguments = request.command(self.session)
        script = Path(request.script)
        self.title.setText(" ".join([script.name, *request.args]))
        self.session_label.setText(f"Session: {self.session}")
        self._set_status(f"Starting {program} …")
        self.follower = EventFollower(self.session)

        env = QProcessEnvironment.systemEnvironment()
        for key, value in request.env.items():
            env.insert(key, value)
        env.insert("PYTHONUNBUFFERED", "1")
        env.remove("QT_QPA_PLATFORM")  # the app's display setting is not the script's business
        proc = QProcess(self)
        proc.setProgram(program)
        proc.setArguments(arguments)
        proc.setWorkingDirectory(str(request.workdir))
        proc.setProcessEnvironment(env)
        proc.setProcessChannelMode(QProcess.ProcessChannelMode.SeparateChannels)
        proc.readyReadStandardOutput.connect(lambda: self._read(False))
        proc.readyReadStandardError.connect(lambda: self._read(True))
        proc.finished.connect(self._on_finished)
        proc.errorOccurred.connect(self._on_error)
        self.process = proc
        self.stop_button.setEnabled(True)
        proc.start()
        self._pid = int(proc.processId())
        self._timer.start()
        return self.session

    def stop(self) -> None:
        """SIGTERM to the runner (it saves what it has and writes `finished`), then, after a
        grace period, SIGKILL to the whole tree."""
        proc = self._running_process()
        if proc is None:
            return
        self._stopping = True
        self.stop_button.setEnabled(False)
        self._set_status("Stopping…")
        self._tree = self._process_tree()
        pid = int(proc.processId())
        if pid > 0:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        self._kill_timer.start()

    def _process_tree(self) -> list:
        if self.process is None:
            return []
        try:
            import psutil

            return psutil.Process(int(self.process.processId())).children(recursive=True)
        except Exception:  # noqa: BLE001 - psutil missing or the process just ended
            return []

    def _kill_tree(self) -> None:
        """Whatever is left: the runner's process group, then every process seen in its tree."""
        tree = self._tree + (self._process_tree() if self.is_running else [])
        pid = self._pid  # also after the runner has exited: its group may hold orphans
        if pid > 0 and hasattr(os, "killpg"):
            try:
                os.killpg(pid, signal.SIGKILL)  # the runner leads its own group
            except OSError:
                pass
        for proc in tree:
            try:
                proc.kill()
            except Exception:  # noqa: BLE001 - already gone
                pass
        proc = self._running_process()
        if proc is not None:
            proc.kill()

    def _read(self, is_err: bool) -> None:
        if self.process is None:
            return
        self.console.feed(bytes((self.process.readAllStandardError() if is_err
                                 else self.process.readAllStandardOutput()).data()), is_err)

    def append_console(self, text: str, color: str | None = None) -> None:
        self.console.append(text, color)

    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error != QProcess.ProcessError.FailedToStart:
            return
        proc = self.process
        if proc is None:  # the signal comes from self.process, so it is set
            return
        message = f"cannot start the interpreter {proc.program()}: {proc.errorString()}"
        self.append_console(f"stallscope: {message}\n", stderr_color())
        self._close_session(None, message)
        self._end(-1)

    def _on_finished(self, code: int, status: QProcess.ExitStatus) -> None:
        if status == QProcess.ExitStatus.CrashExit:
            code = -1
            reason = "stopped by the app" if self._stopping else "ended by a signal"
        else:
            reason = f"runner ended with code {code} without a finished record"
        self._read(False)
        self._read(True)
        self.console.flush()
        self.poll()
        if self.end is None:
            self._close_session(code, reason)
            self.poll()
        self._kill_timer.stop()
        if self._tree or self._stopping:
            self._kill_tree()  # no orphaned DataLoader workers
        self.show_whole_run()
        self._end(code)

    def _close_session(self, code: int | None, reason: str) -> None:
        if self.session is None:
            return
        try:
            write_finished(self.session, code, reason)
        except OSError as exc:
            self.append_console(f"stallscope: could not write to {self.session}: {exc}\n",
                                stderr_color())
        if self.end is None:
            self.end = Finished(kind="finished", t=0.0, rank=None, rc=code, reason=reason)
            self._show_finished()

    def _open_last_trace(self) -> None:
        if self.traces:
            self.sig_trace_ready.emit(self.traces[-1])

    def _end(self, code: int) -> None:
        self._timer.stop()
        self.stop_button.setEnabled(False)
        self.exit_code = code
        self.sig_run_finished.emit(code)

    # ------------------------------------------------------------------ events
    def poll(self) -> None:
        if self.follower is None:
            return
        session = self.session
        assert session is not None  # the follower is always made for self.session
        steps = False
        raw = self.follower.poll()
        self.record_events += [e for e in raw if e.get("event") in RECORD_EVENTS]
        self.loaders += [e for e in raw if e.get("event") == DATALOADER and e.get("rank") in
                         (0, None)]
        for e in map(typed, raw):
            if isinstance(e, StepEvent) and e.rank in (0, None):
                self.series.add(e)
                steps = True
            elif isinstance(e, Started) and e.rank is None:
                self._on_started(e)
            elif isinstance(e, TraceReady) and e.path:
                path = str(resolve_path(session, e.path))
                self.traces.append(path)
                self.open_button.setEnabled(True)
                self._set_status(f"Trace written: {Path(path).name}"
                                 + ("" if e.complete else " (partial window)"))
                self.sig_trace_ready.emit(path)
            elif isinstance(e, LineprofReady) and e.path:
                self.sig_lineprof_ready.emit(str(resolve_path(session, e.path)))
            elif isinstance(e, Message):
                self.append_console(f"stallscope: {e.message}\n", note_color())
                if e.code == "line_profiler_missing":
                    self.sig_lineprof_missing.emit(e.python)
            elif isinstance(e, Finished) and (e.rank is None or self.end is None):
                self.end = e
                self._show_finished()
        if steps:
            self._redraw()
        self._polls += 1
        if self.is_running and self._polls % RECORD_EVERY == 0:
            self.show_whole_run()

    def show_whole_run(self) -> bool:
        """The session's whole-run record (if it has one) into the Whole run tab."""
        return self.session is not None and self.whole.load(self.session, self.record_events)

    def _on_started(self, e: Started) -> None:
        device = ", ".join(e.devices) or "CPU only"
        text = f"Running · torch {e.torch or '?'} · {device} · {e.python or 'python'}"
        if e.overrides:
            text += " · DataLoader: " + ", ".join(e.overrides)
        self._set_status(text)

    def _show_finished(self) -> None:
        e = self.end
        if e is None:
            return
        text = f"Finished: {e.reason}" + (f" · {e.steps} steps" if e.steps is not None else "")
        text += f" · exit code {e.rc}"
        if e.exception is not None:
            text += f"\n{e.exception.text}"
        if e.warning:
            text += f"\n{e.warning}"
        ok = e.rc == 0 and not e.warning
        self._set_status(text, None if ok else stderr_color() if e.rc not in (0, None)
                         else note_color())

    def _set_status(self, text: str, color: str | None = None) -> None:
        self.status.setStyleSheet(f"color: {color};" if color else "")
        self.status.setText(text)
        self.sig_status_changed.emit(text)

    def _redraw(self) -> None:
        s = self.series
        n = s.n
        if n == 0:
            return
        self.charts.draw(s)
        rss = s["rss"][-1]
        phase = {"wait": " (before profiling)", "warmup": " (profiler warming up)",
                 "active": " (profiling)", "done": ""}.get(s.last_phase, "")
        # The one statistic the run summary, compare and tune state: the steady window.
        w = s.steady(queued_batches(self.loaders))
        figures = (f"{w.short_text}" + ("" if w.reached else " (not steady yet)")
                   if w is not None else "not steady yet")
        self.figures.setText(f"step {n - 1}{phase} · {figures}"
                             + (f" · RSS {rss / MB:.0f} MB" if np.isfinite(rss) else ""))

    # ------------------------------------------------------------------ replay
    def replay(self, session: str | os.PathLike) -> None:
        """Show a finished (or still running elsewhere) session from its files."""
        if self.is_running:
            raise RuntimeError("a run is going on in this view")
        self._reset()
        s = open_session(session)
        self.session = s.path
        script = s.run.get("script", "")
        self.title.setText(" ".join([Path(script).name or s.path.name, *s.run.get("args", [])]))
        self.session_label.setText(f"Session: {s.path}")
        self.append_console(s.stdout())
        self.follower = EventFollower(s.path)
        self.poll()
        # show_whole_run() is True only once whole.report is set
        if self.show_whole_run() and self.whole.report is not None and (
                self.whole.report.stalls or self.series.n > 500):
            self.chart_tabs.setCurrentWidget(self.whole)
        if self.end is None:
            self._set_status("No finished record yet: the run may still be going on, or was "
                             "killed", note_color())

    def _reset(self) -> None:
        self.series = StepColumns()
        self.record_events = []
        self.loaders = []
        self.traces = []
        self.end = None
        self.exit_code = None
        self._stopping = False
        self._tree = []
        self.console.reset()
        self.figures.setText("")
        self.open_button.setEnabled(False)
        self.charts.reset()

    def shutdown(self) -> None:
        """Stop a live run and wait for it (the view is closing or the app is quitting), so
        the session still ends with `finished` and no worker is left behind."""
        proc = self._running_process()
        if proc is None:
            return
        self.stop()
        proc.waitForFinished(STOP_GRACE_MS)
        if self.is_running:
            self._kill_tree()
            proc.waitForFinished(2000)

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        self.shutdown()
        super().closeEvent(event)

    def event(self, e: QEvent) -> bool:
        if e.type() == QEvent.Type.DeferredDelete:  # a closed tab is deleteLater()'d
            self.shutdown()
        return super().event(e)


def main(argv: list[str] | None = None) -> int:
    """`python -m stallscope.gui.views.run [SESSION | --demo]`: replay a session or run the demo."""
    from PySide6.QtWidgets import QApplication

    argv = sys.argv[1:] if argv is None else argv
    app = QApplication.instance() or QApplication(sys.argv[:1])
    view = RunView()
    view.resize(1000, 700)
    try:
        if argv and argv[0] != "--demo":
            view.replay(argv[0])
        else:
            view.start(demo_request())
    except StallscopeError as exc:
        print(f"stallscope: error: {exc}", file=sys.stderr)
        return 2
    view.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
