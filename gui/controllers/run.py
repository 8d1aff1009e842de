"""A run's bookkeeping: the launcher's RunHandle (core/launch: here or on a host over ssh)
polled on a timer, its events, Stop, how it ended. What it learns goes out as signals, for
gui/views/run.py to draw.

    view = new_run_view()                # a RunView bound to its RunController (view.controller)
    ctl = view.controller
    ctl.sig_trace_ready.connect(...)     # absolute local path of each trace once it is complete
    ctl.sig_run_finished.connect(...)    # the run's exit code
    ctl.start(request)                   # or ctl.replay(session): a session's files

The launcher owns the process, the stop rule (SIGTERM, then SIGKILL to the whole tree after its
grace) and the `finished` record of a run the runner could not close; this controller only turns
what run.poll() returns into signals. A remote run starts in a thread (ssh deploys the runner
first: seconds); when its connection drops the run goes on there, and reconnect() follows it
again in the same view (events already taken are not taken twice).
Standalone: `python -m stallscope.gui.controllers.run [SESSION | --demo]`.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import cast

from PySide6.QtCore import QCoreApplication, QObject, QTimer, Signal

from stallscope.core import launch
from stallscope.core.capture import layout
from stallscope.core.capture.closing import close_run
from stallscope.core.capture.layout import DATALOADER
from stallscope.core.errors import StallscopeError
from stallscope.core.launch.remote import lost_text
from stallscope.core.session.events import (
    Event,
    Finished,
    LineprofReady,
    Message,
    Started,
    StepColumns,
    StepEvent,
    TraceReady,
)
from stallscope.core.session.reader import (
    EventFollower,
    is_session,
    open_session,
    resolve_path,
)
from stallscope.core.session.record import RECORD_EVENTS
from stallscope.core.session.steady import queued_batches
from stallscope.gui.controllers.run_remote import remote_of, start_into
from stallscope.gui.controllers.run_status import (
    ERROR,
    NOTE,
    PLAIN,
    finished_text,
    read_whole_run,
    started_text,
)
from stallscope.gui.run_request import RunRequest, demo_request
from stallscope.gui.views.run import RunView

POLL_MS = 200
RECORD_EVERY = 15  # polls: the whole-run record is re-read every 3 s while the run goes on
SHUTDOWN_WAIT_S = 2.0  # past the grace: the app quits, the launcher has killed the tree
START_WAIT_S = 30.0    # a closing view waits this long for a remote start to answer



class RunController(QObject):
    sig_opened = Signal(str, object)     # title, session folder: a run starts or a replay opens
    sig_status = Signal(str, str)        # text, level
    sig_output = Signal(object, bool)    # the script's raw output (bytes), is it stderr
    sig_console = Signal(str, str)       # text for the console (stallscope's own lines), level
    sig_output_ended = Signal()          # the process is gone: no more output
    sig_steps = Signal(object, object)   # StepColumns, its steady window (None before one)
    sig_record = Signal(object, object)  # the whole-run Record, the session folder
    sig_replayed = Signal()              # a replay has shown all its session has
    sig_trace_ready = Signal(str)
    sig_lineprof_ready = Signal(str)
    sig_lineprof_missing = Signal(str)   # the run's python, which lacks line_profiler
    sig_stoppable = Signal(bool)         # whether Stop can be asked now
    sig_reconnectable = Signal(bool)     # a remote run's connection ended: Reconnect can follow
    sig_run_finished = Signal(int)       # the run's exit code

    def __init__(self, parent: QObject | None = None,
                 grace_s: float = launch.STOP_GRACE_S) -> None:
        super().__init__(parent)
        self.request: RunRequest | None = None
        self.grace_s = grace_s
        self._reset(None)
        self._timer = QTimer(self, interval=POLL_MS)
        self._timer.timeout.connect(self.poll)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        if parent is not None:  # its view: gone without closing, it still ends the run
            parent.destroyed.connect(self._parent_gone)

    def _reset(self, session: Path | None) -> None:
        self.session = session
        self.handle: launch.RunHandle | None = None
        self.series = StepColumns()
        self.loaders: list[dict] = []        # the run's dataloader events (rank 0): queued batches
        self.record_events: list[dict] = []  # epoch, save, tail, trace_ready: the record's
        self.traces: list[str] = []
        self.end: Finished | None = None     # the run's typed finished record
        self.ending: launch.Ending | None = None
        self.exit_code: int | None = None
        self.stopping = False
        self._polls = 0
        self._starting: tuple[threading.Thread, dict] | None = None  # a remote start under way
        self.remote: tuple[launch.Where, str] | None = None  # (where, remote session) to attach
        self._high: dict[tuple, float] = {}   # (rank, kind): the latest event time taken
        self._resume: dict[tuple, float] = {}  # _high when the connection was taken up again

    @property
    def finished_record(self) -> dict | None:
        """The finished record's main fields as a dict (rc, reason, steps, warning)."""
        e = self.end
        return None if e is None else {"rc": e.rc, "reason": e.reason, "steps": e.steps,
                                       "warning": e.warning}

    # ------------------------------------------------------------------ running
    @property
    def is_running(self) -> bool:
        return self._starting is not None or (self.handle is not None and self.handle.running)

    @property
    def stoppable(self) -> bool:
        """A run goes on and has not been asked to stop yet (what Run > Stop follows)."""
        return self.is_running and not self.stopping

    def start(self, request: RunRequest) -> Path:
        if self.is_running:
            raise RuntimeError("a run is already going on under this controller")
        session = request.new_session_dir()
        self._reset(session)
        self.request = request
        self.sig_reconnectable.emit(False)
        where = request.where()
        self.sig_opened.emit(" ".join([Path(request.script).name, *request.args]), session)
        self.sig_status.emit(f"Connecting to {where.host} …" if where.remote
                             else f"Starting {where.python} …", PLAIN)
        job = request.job(session)
        if where.remote:  # ssh deploys and starts the runner: off the GUI thread
            box: dict = {}
            thread = threading.Thread(target=start_into, args=(box, where, job, self._output),
                                      daemon=True, name="stallscope-remote-start")
            self._starting = (thread, box)
            thread.start()
        else:
            try:
                self.handle = launch.start(where, job, on_output=self._output)
            except StallscopeError as exc:
                self._not_started(str(exc))
                return session
        self.sig_stoppable.emit(True)
        self._timer.start()
        return session

    def _started(self) -> bool:
        """Whether a remote start has finished (its handle taken, or its error shown)."""
        if self._starting is None:
            return True
        thread, box = self._starting
        if thread.is_alive():
            return False
        self._starting = None
        if "error" in box:
            self._not_started(box["error"])
            return True
        self.handle = handle = box["handle"]
        where = box["where"]
        self.remote = (where, str(handle.remote_session))
        self.sig_status.emit(f"Running on {where.host} · {handle.remote_session}", PLAIN)
        if self.stopping:  # Stop was asked while ssh connected
            handle.stop(grace=self.grace_s)
        return True

    def _not_started(self, message: str) -> None:
        """The launcher could not start the run: its one line, in the console and the
        session's `finished` record."""
        self.sig_console.emit(f"stallscope: {message}\n", ERROR)
        if self.session is not None:
            try:
                self.session.mkdir(parents=True, exist_ok=True)
                (self.session / layout.EVENTS).touch()
                close_run(self.session, None, message)
            except OSError as exc:
                self.sig_console.emit(f"stallscope: could not write to {self.session}: {exc}\n",
                                      ERROR)
        self.end = Finished(kind="finished", t=0.0, rank=None, rc=None, reason=message)
        self.sig_status.emit(f"Not started: {message}", ERROR)
        self._end(-1)

    def stop(self) -> None:
        """The launcher's stop rule: SIGTERM to the runner, SIGKILL to its tree after the grace
        (here or on the host); the run ends on a later poll."""
        if not self.stoppable:
            return
        self.stopping = True
        self.sig_stoppable.emit(False)
        self.sig_status.emit("Stopping…", PLAIN)
        if self.handle is not None:  # else once the remote start is done (_started)
            self.handle.stop(grace=self.grace_s)

    def _output(self, data: bytes, is_err: bool) -> None:
        self.sig_output.emit(bytes(data), is_err)

    def _ended(self, ending: launch.Ending) -> None:
        if ending.lost:
            self._lost(ending.reason)
            return
        self.ending = ending
        self.sig_reconnectable.emit(False)
        self.sig_output_ended.emit()
        record = ending.finished
        if record is not None and (self.end is None or record.rank is None):
            self._finished(record)
        elif self.end is None:
            self._finished(Finished(kind="finished", t=0.0, rank=None, rc=ending.rc,
                                    reason=ending.reason))
        self.show_whole_run()
        self._end(ending.rc if ending.rc is not None else -1)

    def _end(self, code: int) -> None:
        self._timer.stop()
        self.sig_stoppable.emit(False)
        self.exit_code = code
        self.sig_run_finished.emit(code)

    # ------------------------------------------------------------------ events
    def poll(self) -> None:
        if not self._started():
            return
        handle = self.handle
        if handle is None or self.ending is not None or (handle.ending and handle.ending.lost):
            return  # nothing runs, it has ended, or it waits for reconnect()
        self._take(handle.poll())
        if handle.ending is not None:
            self._ended(handle.ending)
            return
        self._polls += 1
        if self._polls % RECORD_EVERY == 0:
            self.show_whole_run()

    def _take(self, events: list[Event]) -> None:
        """Typed events (every rank) into the series, the status and the signals."""
        if self._resume:
            events = [e for e in events if not self._taken(e)]
        for e in events:
            key = (e.rank, e.kind)
            self._high[key] = max(e.t, self._high.get(key, e.t))
        steps = False
        self.record_events += [e.raw for e in events if e.kind in RECORD_EVENTS]
        self.loaders += [e.raw for e in events if e.kind == DATALOADER and e.rank in (0, None)]
        for e in events:
            if isinstance(e, StepEvent) and e.rank in (0, None):
                self.series.add(e)
                steps = True
            elif isinstance(e, Started) and e.rank is None:
                self.sig_status.emit(started_text(e), PLAIN)
            elif isinstance(e, TraceReady) and e.path and self.session is not None:
                self._trace_ready(str(resolve_path(self.session, e.path)), e.complete)
            elif isinstance(e, LineprofReady) and e.path and self.session is not None:
                self.sig_lineprof_ready.emit(str(resolve_path(self.session, e.path)))
            elif isinstance(e, Message):
                self.sig_console.emit(f"stallscope: {e.message}\n", NOTE)
                if e.code == "line_profiler_missing":
                    self.sig_lineprof_missing.emit(e.python)
            elif isinstance(e, Finished) and (e.rank is None or self.end is None):
                self._finished(e)
        if steps and self.series.n:
            # the one statistic the run summary, compare and tune state: the steady window
            self.sig_steps.emit(self.series, self.series.steady(queued_batches(self.loaders)))

    def _trace_ready(self, path: str, complete: bool) -> None:
        self.traces.append(path)
        self.sig_status.emit(f"Trace written: {Path(path).name}"
                             + ("" if complete else " (partial window)"), PLAIN)
        self.sig_trace_ready.emit(path)

    def _finished(self, e: Finished) -> None:
        self.end = e
        self.sig_status.emit(*finished_text(e))

    def show_whole_run(self) -> bool:
        """The session's whole-run record (if it has one yet) out through sig_record."""
        record = None if self.session is None else read_whole_run(self.session,
                                                                   self.record_events)
        if record is not None:
            self.sig_record.emit(record, self.session)
        return record is not None

    # ------------------------------------------------------------------ reconnect
    def _lost(self, reason: str) -> None:
        """The connection to the host ended; the run goes on there. The launcher's reason
        names the CLI's attach; ssh's own words, when it said something, stay below."""
        self._timer.stop()
        self.sig_stoppable.emit(False)
        if self.remote is not None:
            where, remote_session = self.remote
            text = f"Connection to {where.host} lost: the run goes on there. Reconnect " \
                   "follows it again, fetching what it wrote meanwhile."
            if reason != lost_text(where, remote_session):
                text += "\n" + reason
        else:
            text = f"Connection lost: {reason}"
        self.sig_status.emit(text, NOTE)
        self.sig_reconnectable.emit(self.remote is not None)

    def _taken(self, e: Event) -> bool:
        """Was `e` taken before the connection was taken up again (the new follower reads the
        mirror from its start)? A trace by its path (one may arrive only now), the rest by time."""
        if isinstance(e, TraceReady):
            return self.session is not None and \
                str(resolve_path(self.session, e.path)) in self.traces
        return e.t <= self._resume.get((e.rank, e.kind), float("-inf"))

    @property
    def can_reconnect(self) -> bool:
        return self.remote is not None and not self.is_running and self.end is None

    def reconnect(self) -> bool:
        """Follow the remote run again (core.launch.attach: the mirror fetches only what it
        lacks); False with the reason in the status when ssh cannot."""
        if not self.can_reconnect or self.remote is None or self.session is None:
            return False
        where, remote_session = self.remote
        self.sig_status.emit(f"Reconnecting to {where.host} …", PLAIN)
        try:
            handle = launch.attach(where, remote_session, self.session, on_output=self._output)
        except StallscopeError as exc:
            self.sig_status.emit(f"Connection lost: {exc}", NOTE)
            return False
        self.handle, self.ending, self.stopping = handle, None, False
        self._resume = dict(self._high)
        self.sig_reconnectable.emit(False)
        self.sig_stoppable.emit(True)
        self.sig_status.emit(f"Reconnected to {where.host}: following {remote_session}", PLAIN)
        self._timer.start()
        return True

    def attach(self, where: launch.Where, remote_session: str, session: Path) -> bool:
        """Follow a run on a host from here (Run > Attach to remote run…) into the local
        mirror `session`: what a mirror of it already holds is shown first, then the rest is
        fetched (nothing twice)."""
        if self.is_running:
            raise RuntimeError("a run is going on under this controller")
        if is_session(session):
            self.replay(session)
        else:
            self._reset(Path(session))
            self.request = None
            self.sig_opened.emit(f"{where.host}:{remote_session}", Path(session))
        self.remote = (where, remote_session)
        return self.reconnect()

    # ------------------------------------------------------------------ replay
    def replay(self, session: str | os.PathLike) -> None:
        """A finished (or still running elsewhere) session, from its files."""
        if self.is_running:
            raise RuntimeError("a run is going on under this controller")
        s = open_session(session)
        self._reset(s.path)
        self.request = None
        script = s.run.get("script", "")
        self.sig_opened.emit(" ".join([Path(script).name or s.path.name,
                                       *s.run.get("args", [])]), s.path)
        self.sig_console.emit(s.stdout(), PLAIN)
        self._take(EventFollower(s.path).poll_typed())
        self.show_whole_run()
        self.remote = remote_of(s.run) if self.end is None else None
        if self.remote is not None:  # a mirror: the run may go on on its host
            self.sig_status.emit(f"No finished record yet: the run may still be going on on "
                                 f"{self.remote[0].host}; Reconnect follows it again", NOTE)
        elif self.end is None:
            self.sig_status.emit("No finished record yet: the run may still be going on, or "
                                 "was killed", NOTE)
        self.sig_reconnectable.emit(self.remote is not None)
        self.sig_replayed.emit()

    def _parent_gone(self) -> None:
        """The view was deleted without the close or DeferredDelete it normally reports: the
        runner (a session of its own) would outlive it, so end it here, telling nobody."""
        self.blockSignals(True)
        self.shutdown()

    def shutdown(self) -> None:
        """Stop a live run and wait for it (its view is closing or the app is quitting), so
        the session still ends with `finished` and no worker is left behind."""
        if self._starting is not None:  # a remote start: let ssh answer, then stop it
            self._starting[0].join(START_WAIT_S)
            self._started()
        handle = self.handle
        if handle is None or not handle.running:
            return
        self.stop()
        handle.wait(self.grace_s + SHUTDOWN_WAIT_S)
        self.poll()


def new_run_view(parent=None) -> RunView:
    """A RunView bound to a RunController of its own (view.controller, a child of the view:
    closing the view stops its run)."""
    view = RunView(parent)
    view.bind(RunController(view))
    return view


def main(argv: list[str] | None = None) -> int:
    """`python -m stallscope.gui.controllers.run [SESSION | --demo]`: replay a session or run
    the demo."""
    from PySide6.QtWidgets import QApplication

    from stallscope.gui import theme

    argv = sys.argv[1:] if argv is None else argv
    app = cast(QApplication, QApplication.instance() or QApplication(sys.argv[:1]))
    theme.apply_theme(app, theme.saved_mode())  # as the app and the standalone views do
    view = new_run_view()
    view.resize(1000, 700)
    try:
        if argv and argv[0] != "--demo":
            view.controller.replay(argv[0])
        else:
            view.controller.start(demo_request())
    except StallscopeError as exc:
        print(f"stallscope: error: {exc}", file=sys.stderr)
        return 2
    view.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
