"""The Run dialog's interpreter check: does this Python have torch, and CUDA? Asked in a child
process (QProcess), answered through sig_result(text, ok) with ok True, False or None (still
checking, or nothing to check).

    probe = TorchProbe(dialog)
    probe.sig_result.connect(show)
    probe.check(python)     # a new check replaces the one still running
    probe.stop()            # the dialog closes
"""

from __future__ import annotations

import shutil
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, Signal
from shiboken6 import isValid

from stallscope.gui.run_request import TORCH_PROBE


class TorchProbe(QObject):
    sig_result = Signal(str, object)  # text, ok (True, False, None: checking / not checked)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._probe: QProcess | None = None

    def check(self, python: str) -> None:
        self.stop()
        if not python or not (Path(python).is_file() or shutil.which(python)):
            self.sig_result.emit(f"{python or 'No interpreter'}: not found", False)
            return
        self.sig_result.emit("checking for torch…", None)
        probe = QProcess(self)
        probe.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        probe.finished.connect(lambda code, _status, p=probe, py=python:
                               self._on_probe(p, py, code))
        probe.errorOccurred.connect(lambda error, p=probe, py=python:
                                    self._on_probe_error(p, py, error))
        self._probe = probe
        probe.start(python, ["-c", TORCH_PROBE])

    def stop(self) -> None:
        probe, self._probe = self._probe, None
        if probe is None:
            return
        for sig in (probe.finished, probe.errorOccurred):
            try:
                sig.disconnect()
            except (RuntimeError, TypeError):
                pass
        probe.kill()
        probe.waitForFinished(1000)
        probe.deleteLater()

    def _current(self, probe: QProcess) -> bool:
        # the dialog may have gone away, or asked about another interpreter since
        return isValid(self) and isValid(probe) and probe is self._probe

    def _on_probe_error(self, probe: QProcess, python: str, error) -> None:
        if self._current(probe) and error == QProcess.ProcessError.FailedToStart:
            self.sig_result.emit(f"{python}: cannot be started", False)

    def _on_probe(self, probe: QProcess, python: str, code: int) -> None:
        if not self._current(probe):
            return
        out = bytes(probe.readAll().data()).decode(errors="replace").strip().splitlines()
        last = out[-1] if out else ""
        if last.startswith("OK "):
            _, version, cuda = last.split()
            self.sig_result.emit(f"torch {version} · CUDA {'yes' if cuda == '1' else 'no'}",
                                 True)
        elif last.startswith("NO"):
            self.sig_result.emit(f"{python} has no torch: install it with  {python} -m pip "
                                 "install torch", False)
        else:
            self.sig_result.emit(f"{python} did not answer (exit {code})", False)
