"""Help > About: what stallscope is and the versions it runs on (for bug reports).

torch is looked up in a child process (QProcess) because importing it takes seconds: the dialog
opens at once and fills the torch line in when the probe answers. In a packaged app (no torch
inside) the probe asks the first `python3` on PATH, the interpreter that runs the user's scripts.
"""

from __future__ import annotations

import platform
import shutil
import sys
from typing import cast

from PySide6.QtCore import QProcess, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from stallscope.core import __version__
from stallscope.gui import theme
from stallscope.gui.widgets import plain_label, rich_label

TORCH_PROBE = (
    "import torch, sys; cuda = torch.version.cuda or getattr(torch.version, 'hip', None); "
    "sys.stdout.write(torch.__version__ + ('  (CUDA ' + cuda + ')' if cuda else '  (CPU only)'))"
)
PROBE_TIMEOUT_MS = 30_000


def static_versions() -> dict[str, str]:
    """Everything known without importing torch."""
    import numpy
    import pyqtgraph
    import PySide6
    from PySide6.QtCore import qVersion

    return {
        "stallscope": __version__,
        "Qt": qVersion(),
        "PySide6": PySide6.__version__,
        "pyqtgraph": pyqtgraph.__version__,
        "numpy": numpy.__version__,
        "Python": f"{platform.python_version()} ({platform.python_implementation()})",
        "Platform": f"{platform.system()} {platform.release()} {platform.machine()}",
    }


def probe_interpreter() -> str | None:
    """The Python that can import torch: ours, or in a frozen app the one on PATH."""
    if not getattr(sys, "frozen", False):
        return sys.executable
    return shutil.which("python3") or shutil.which("python")


class TorchProbe(QProcess):
    """Asks an interpreter for torch's version without blocking; emits the line to show."""

    sig_probe_finished = Signal(str)

    def __init__(self, parent=None, interpreter: str | None = None) -> None:
        super().__init__(parent)
        self._interpreter = interpreter if interpreter is not None else probe_interpreter()
        self._done = False
        self._timer = QTimer(self, singleShot=True, interval=PROBE_TIMEOUT_MS)
        self._timer.timeout.connect(self._on_timeout)
        self.finished.connect(self._on_finished)
        self.errorOccurred.connect(self._on_error)

    def start_probe(self) -> None:
        if not self._interpreter:
            self._report("not found (no Python interpreter on PATH)")
            return
        self.setProgram(self._interpreter)
        self.setArguments(["-c", TORCH_PROBE])
        self._timer.start()
        self.start()

    def _on_finished(self, code: int, _status) -> None:
        out = bytes(self.readAllStandardOutput().data()).decode(errors="replace").strip()
        if code == 0 and out:
            self._report(out)
        else:
            self._report(f"not found in {self._interpreter}")

    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._report(f"not found ({self._interpreter} would not start)")

    def _on_timeout(self) -> None:
        self._report("not found (the interpreter did not answer in 30 s)")
        self.kill()

    def _report(self, text: str) -> None:
        if not self._done:
            self._done = True
            self._timer.stop()
            self.sig_probe_finished.emit(text)


class AboutDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, interpreter: str | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About stallscope")
        self.setMinimumWidth(460)
        self.versions = static_versions()
        self.versions["torch"] = "looking…"
        self.labels: dict[str, QLabel] = {}

        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 20, 24, 16)
        layout.setSpacing(14)
        header = QHBoxLayout()
        header.setSpacing(14)
        logo = QLabel()
        logo.setPixmap(theme.app_icon().pixmap(QSize(56, 56)))
        header.addWidget(logo, 0, Qt.AlignmentFlag.AlignTop)
        words = QVBoxLayout()
        title = rich_label("<b style='font-size:18px'>stallscope {}</b>", __version__)
        blurb = rich_label(
            "Why is my GPU waiting, and what do I change?<br>"
            "A profiler for PyTorch training input pipelines.<br>MIT licence."
        )
        blurb.setWordWrap(True)
        words.addWidget(title)
        words.addWidget(blurb)
        header.addLayout(words, 1)
        layout.addLayout(header)

        form = QFormLayout()
        form.setHorizontalSpacing(18)
        form.setVerticalSpacing(4)
        for name in ("stallscope", "torch", "Qt", "PySide6", "pyqtgraph", "numpy", "Python",
                     "Platform"):
            value = plain_label(self.versions[name])  # what an interpreter printed
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.labels[name] = value
            form.addRow(f"{name}:", value)
        layout.addLayout(form)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = QPushButton("Copy versions")
        self.copy_button.setAutoDefault(False)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.clicked.connect(self.copy_versions)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

        self.probe = TorchProbe(self, interpreter)
        self.probe.sig_probe_finished.connect(self._set_torch)
        self.probe.start_probe()

    def version_text(self) -> str:
        return "\n".join(f"{k}: {v}" for k, v in self.versions.items())

    def copy_versions(self) -> None:
        QGuiApplication.clipboard().setText(self.version_text())

    def _set_torch(self, text: str) -> None:
        self.versions["torch"] = text
        self.labels["torch"].setText(text)

    def done(self, result: int) -> None:
        if self.probe.state() != QProcess.ProcessState.NotRunning:
            self.probe.kill()
            self.probe.waitForFinished(1000)
        super().done(result)


def main() -> int:
    app = cast(QApplication, QApplication.instance() or QApplication(sys.argv[:1]))
    theme.apply_theme(app, theme.saved_mode())
    dialog = AboutDialog()
    if len(sys.argv) > 1:  # render to a PNG once torch answered
        dialog.probe.sig_probe_finished.connect(
            lambda _t: QTimer.singleShot(0, lambda: (dialog.grab().save(sys.argv[1]), app.quit()))
        )
        dialog.show()
        return app.exec()
    return dialog.exec()


if __name__ == "__main__":
    sys.exit(main())
