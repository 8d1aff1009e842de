"""The Run dialog's interpreter check: does this Python have torch, and CUDA? Asked in a child
process (QProcess), here or on a host through the user's own ssh (BatchMode: it never asks;
its failure is one line with what to do), answered through sig_result(text, ok) with ok True,
False or None (still checking, or nothing to check).

    probe = TorchProbe(dialog)
    probe.sig_result.connect(show)
    probe.check(python)                 # a new check replaces the one still running
    probe.check_remote(host, python)    # the same on a host, once the fields rest (REMOTE_MS)
    probe.stop()                        # the dialog closes
"""

from __future__ import annotations

import shutil
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, QTimer, Signal
from shiboken6 import isValid

from stallscope.core.launch import Where, ssh
from stallscope.gui.run_request import TORCH_PROBE, ssh_env_options

REMOTE_MS = 800  # a host is asked once its name and interpreter have stopped changing


class TorchProbe(QObject):
    sig_result = Signal(str, object)  # text, ok (True, False, None: checking / not checked)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._probe: QProcess | None = None
        self._host = ""
        self._later = QTimer(self, singleShot=True, interval=REMOTE_MS)
        self._later.timeout.connect(self._ask_host)
        self._asked = ("", "")

    def check(self, python: str) -> None:
        self.stop()
        if not python or not (Path(python).is_file() or shutil.which(python)):
            self.sig_result.emit(f"{python or 'No interpreter'}: not found", False)
            return
        self._start(python, [python, "-c", TORCH_PROBE], "")

    def check_remote(self, host: str, python: str) -> None:
        """Ask `host` (already checked as a host name) once the fields rest."""
        self.stop()
        self._asked = (host, python)
        self.sig_result.emit(f"asking {host} for torch…", None)
        self._later.start()

    def _ask_host(self) -> None:
        host, python = self._asked
        where = Where(host=host, python=python, ssh_options=ssh_env_options())
        line = f"exec {ssh.word(python)} -c {ssh.word(TORCH_PROBE)}"
        self._start(python, ssh.command(where, line), host)

    def _start(self, python: str, argv: list[str], host: str) -> None:
        if not host:
            self.sig_result.emit("checking for torch…", None)
        probe = QProcess(self)
        probe.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        probe.finished.connect(lambda code, _status, p=probe, py=python:
                               self._on_probe(p, py, code))
        probe.errorOccurred.connect(lambda error, p=probe, py=python:
                                    self._on_probe_error(p, py, error))
        self._probe, self._host = probe, host
        probe.start(argv[0], argv[1:])

    def stop(self) -> None:
        self._later.stop()
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
            self.sig_result.emit("no ssh client here: install OpenSSH" if self._host
                                 else f"{python}: cannot be started", False)

    def _on_probe(self, probe: QProcess, python: str, code: int) -> None:
        if not self._current(probe):
            return
        text = bytes(probe.readAll().data()).decode(errors="replace").strip()
        out = text.splitlines()
        last = out[-1] if out else ""
        where = f" on {self._host}" if self._host else ""
        if last.startswith("OK ") and len(last.split()) == 3:
            _, version, cuda = last.split()
            self.sig_result.emit(f"torch {version} · CUDA {'yes' if cuda == '1' else 'no'}"
                                 + where, True)
        elif last.startswith("NO"):
            self.sig_result.emit(f"{python}{where} has no torch: install it with  {python} -m "
                                 "pip install torch", False)
        elif self._host:  # ssh's own words, in one line, with what to do
            self.sig_result.emit(ssh.explain(self._host, text, code), False)
        else:
            self.sig_result.emit(f"{python} did not answer (exit {code})", False)
