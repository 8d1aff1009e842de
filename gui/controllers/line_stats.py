"""Line stats for the heatmap, read off the GUI thread, and line_profiler installed on request.

    stats = LineStatsController(parent)
    stats.sig_stats_loaded.connect(on_loaded)     # (key, [LineStats, ...]): one per path, in order
    stats.sig_stats_failed.connect(on_failed)     # (key, one-line message naming the file)
    stats.load(path, "open", trust_pickle=True)   # a session, a trace in one, a .json, a .lprof
    stats.load([doc, compared], "session", optional=True)   # documents without stats: []
    stats.install_line_profiler(python)           # pip in a QProcess -> sig_install_finished

One job slot per key: a newer load cancels the one it supersedes and the older result is
dropped. Never touches widgets; the view shows what the signals carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, Signal

from stallscope.core import lineprof
from stallscope.core.lineprof import Profile
from stallscope.gui.workers import JobRunner, JobWorker


@dataclass(frozen=True)
class LineStats:
    """What one path holds: its session folder (None for a lone file) and its profiles
    (the dataset's __getitem__ first)."""

    path: str
    session: Path | None
    profiles: list[Profile] = field(default_factory=list)

    @property
    def name(self) -> str:
        """A short name for titles: the session folder's, else the file's."""
        return self.session.name if self.session is not None else Path(self.path).name


def read_all(paths: list[str], trust_pickle: bool, optional: bool) -> list[LineStats]:
    """The job: read each path's line stats (worker thread)."""
    out = []
    for path in paths:
        session, profiles = lineprof.read_stats(path, trust_pickle=trust_pickle,
                                                optional=optional)
        out.append(LineStats(path, session, profiles))
    return out


class LineStatsController(QObject):
    sig_stats_loaded = Signal(str, object)   # key, list[LineStats] (one per path asked)
    sig_stats_failed = Signal(str, str)      # key, one-line message naming the file
    sig_install_finished = Signal(bool, str)  # ok, pip's last line (or why it did not run)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runner = JobRunner(self)  # the one record of which reads run
        self.process: QProcess | None = None

    @property
    def busy(self) -> bool:
        return self.runner.busy

    def load(self, paths: str | Path | list, key: str = "default", *,
             trust_pickle: bool = False, optional: bool = False) -> JobWorker:
        """Read the line stats of one path or several off the GUI thread. A .lprof (a pickle)
        is read only with trust_pickle=True: ask the user first (heatmap_files.ask_trust)."""
        wanted = [str(p) for p in (paths if isinstance(paths, list) else [paths])]
        worker = JobWorker(lambda _cancel: read_all(wanted, trust_pickle, optional))
        live = self.runner.while_current(worker, key)  # a superseded read's results drop
        worker.signals.sig_result.connect(live(lambda result: self.sig_stats_loaded.emit(
            key, result)))
        worker.signals.sig_error.connect(live(lambda msg: self.sig_stats_failed.emit(key, msg)))
        self.runner.start(worker, key)
        return worker

    def cancel(self) -> None:
        self.runner.cancel()

    def install_line_profiler(self, python: str) -> bool:
        """Run `python -m pip install line_profiler` in a QProcess; False while one runs."""
        if self.process is not None:
            return False
        command = lineprof.install_command(python or None)
        self.process = QProcess(self)
        self.process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        self.process.finished.connect(self._installed)
        self.process.errorOccurred.connect(self._install_error)
        self.process.start(command[0], command[1:])
        return True

    # -- internals
    def _installed(self, code: int, _status=None) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        out = bytes(process.readAll().data()).decode(errors="replace").strip().splitlines()
        tail = out[-1] if out else process.errorString()
        process.deleteLater()
        self.sig_install_finished.emit(code == 0, tail)

    def _install_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:  # no finished() follows
            self._installed(-1)
