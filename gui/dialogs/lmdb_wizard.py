"""The LMDB wizard: convert an image folder or a Dataset factory into an LMDB, prove the gain.

    wizard = open_lmdb_wizard(parent)            # from the main window (start screen, Tools menu)
    python -m stallscope.gui.dialogs.lmdb_wizard [SRC]   # standalone

Pages: source (preview + detected fields/classes) -> options (destination, preprocessing,
estimated size, free space) -> conversion (progress, samples/s, ETA, Cancel, Resume) -> result
(verification, skipped files, before/after throughput chart, a code snippet to copy).
All work runs in JobWorkers (core/lmdb_*.py); the pages only show what the jobs report.
"""

from __future__ import annotations

import ast
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFont, QFontDatabase, QGuiApplication, QImage, QPixmap
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
    QWizard,
    QWizardPage,
)

from stallscope.core.lmdb.convert import ConvertResult, convert, destination_state
from stallscope.core.lmdb.source import Preprocess, SourceInfo, inspect_source
from stallscope.core.lmdb.source import describe as describe_structure
from stallscope.core.lmdb.verify import Throughput, VerifyResult, measure, verify
from stallscope.gui.workers import JobRunner, JobWorker

THUMB = 88
OK_COLOR, BAD_COLOR, DIM_COLOR = "#1a7f37", "#c62828", "#6b7280"


def open_lmdb_wizard(parent: QWidget | None = None, source: str = "") -> QWizard:
    """Show the wizard (non-modal) and return it; it deletes itself when closed."""
    wizard = LMDBWizard(parent, source)
    wizard.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    wizard.show()
    return wizard


class LMDBWizard(QWizard):
    """Holds what the pages share: the inspected source, the options, and the results."""

    def __init__(self, parent: QWidget | None = None, source: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Convert a dataset to LMDB")
        self.setWizardStyle(QWizard.WizardStyle.ModernStyle)
        self.setOption(QWizard.WizardOption.NoBackButtonOnLastPage, True)
        self.setOption(QWizard.WizardOption.NoCancelButtonOnLastPage, True)
        self.setButtonText(QWizard.WizardButton.CommitButton, "Convert")
        self.resize(880, 720)
        self.runner = JobRunner(self)
        self.info: SourceInfo | None = None
        self.result: ConvertResult | None = None
        self.source_page = SourcePage(self)
        self.options_page = OptionsPage(self)
        self.convert_page = ConvertPage(self)
        self.result_page = ResultPage(self)
        for page in (self.source_page, self.options_page, self.convert_page, self.result_page):
            self.addPage(page)
        if source:
            self.source_page.spec_edit.setText(source)

    # what the options page chose, read by the conversion page
    def preprocess(self) -> Preprocess:
        return self.options_page.preprocess()

    def destination(self) -> str:
        return self.options_page.dst_edit.text().strip()

    def spec(self) -> str:
        return self.source_page.spec()

    def done(self, code: int) -> None:  # closing or cancelling stops every job (work is kept)
        for slot in ("inspect", "estimate", "convert", "verify", "measure"):
            self.runner.cancel(slot)
        super().done(code)


# ----------------------------------------------------------------------------- source page


class SourcePage(QWizardPage):
    def __init__(self, wizard: LMDBWizard) -> None:
        super().__init__()
        self.wiz = wizard
        self.setTitle("Source")
        self.setSubTitle(
            "An image folder (class subfolders become labels) or a Python factory "
            "`file.py:factory` that returns a map-style Dataset."
        )
        self.spec_edit = QLineEdit()
        self.spec_edit.setPlaceholderText("/data/train   or   /code/datasets.py:make_train_set")
        folder_btn = QPushButton("Folder…")
        factory_btn = QPushButton("Python file…")
        folder_btn.clicked.connect(self._choose_folder)
        factory_btn.clicked.connect(self._choose_factory)
        row = QHBoxLayout()
        row.addWidget(self.spec_edit, 1)
        row.addWidget(folder_btn)
        row.addWidget(factory_btn)

        self.status = QLabel("Choose a folder of images or a factory.")
        self.status.setWordWrap(True)
        self.details = QLabel()
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.thumbs = QGridLayout()
        self.thumbs.setSpacing(10)
        thumbs_box = QWidget()
        thumbs_box.setLayout(self.thumbs)

        self._sections = [_heading("Preview (after the chosen preprocessing)"), thumbs_box,
                          _heading("Detected"), self.details]  # fmt: skip
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.status)
        for widget in self._sections:
            layout.addWidget(widget)
            widget.setVisible(False)  # shown once a source is inspected
        layout.addStretch(1)

        self._timer = QTimer(self, singleShot=True, interval=300)
        self._timer.timeout.connect(self._inspect)
        self.spec_edit.textChanged.connect(self._on_spec_changed)
        self._inspected_spec = ""

    def spec(self) -> str:
        return self.spec_edit.text().strip()

    def isComplete(self) -> bool:  # noqa: N802 - Qt API
        return self.wiz.info is not None and self._inspected_spec == self.spec()

    def _choose_folder(self) -> None:
        start = self.spec() or str(Path.home())
        path = QFileDialog.getExistingDirectory(self, "Image folder", start)
        if path:
            self.spec_edit.setText(path)

    def _choose_factory(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Python file", "", "Python (*.py)")
        if path:
            names = factory_candidates(path)
            self.spec_edit.setText(f"{path}:{names[0] if names else 'make'}")

    def _on_spec_changed(self) -> None:
        self.wiz.info = None
        self.completeChanged.emit()
        self._timer.start()

    def _inspect(self) -> None:
        spec = self.spec()
        if not spec:
            self._show_status("Choose a folder of images or a factory.", DIM_COLOR)
            return
        self._show_status("Inspecting…", DIM_COLOR)
        pre = self.wiz.preprocess()
        worker = JobWorker(lambda cancel: inspect_source(spec, pre, n_preview=8))
        worker.signals.sig_result.connect(self._on_info)
        worker.signals.sig_error.connect(self._on_error)
        self._pending = spec
        self.wiz.runner.start(worker, "inspect")

    def _on_info(self, info: SourceInfo) -> None:
        if self._pending != self.spec():
            return
        self.wiz.info = info
        self._inspected_spec = self.spec()
        kind = "Image folder" if info.kind == "folder" else "Factory dataset"
        classes = f" in {len(info.classes)} classes" if info.classes else ""
        self._show_status(f"{kind}: {info.count:,} samples{classes}.", OK_COLOR)
        lines = [f"<b>Fields</b>: {', '.join(info.field_info) or '-'}"]
        if info.kind == "factory":
            lines.append(f"<b>Structure</b>: {describe_structure(info.structure)}")
        if info.classes:
            shown = ", ".join(info.classes[:12])
            more = f" … and {len(info.classes) - 12} more" if len(info.classes) > 12 else ""
            lines.append(f"<b>Classes</b>: {shown}{more}")
        lines.append(f"<b>Stored per sample</b>: {_size(info.bytes_per_sample)} decoded")
        for note in info.notes[:4]:
            lines.append(f"<span style='color:{BAD_COLOR}'>{_esc(note)}</span>")
        self.details.setText("<br>".join(lines))
        self._fill_thumbs(info.preview)
        for widget in self._sections:
            widget.setVisible(True)
        self._sections[0].setVisible(bool(info.preview))
        self.completeChanged.emit()

    def _on_error(self, message: str) -> None:
        self._show_status(message, BAD_COLOR)
        self._fill_thumbs([])
        self.details.setText("")
        for widget in self._sections:
            widget.setVisible(False)

    def _show_status(self, text: str, color: str) -> None:
        self.status.setText(f"<span style='color:{color}'>{_esc(text)}</span>")

    def _fill_thumbs(self, preview) -> None:
        while self.thumbs.count():
            item = self.thumbs.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()
        for i, (caption, image) in enumerate(preview):
            self.thumbs.addWidget(_thumb(caption, image), i // 6, i % 6)


def factory_candidates(path: str) -> list[str]:
    """Top-level functions and classes of a .py that can be called without arguments."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            args = node.args
            if len(args.args) - len(args.defaults) == 0 and not args.posonlyargs:
                names.append(node.name)
        elif isinstance(node, ast.ClassDef):
            names.append(node.name)
    public = [n for n in names if not n.startswith("_")]
    return sorted(public, key=lambda n: (not any(k in n.lower() for k in ("make", "data")), 0))


# ----------------------------------------------------------------------------- options page


class OptionsPage(QWizardPage):
    def __init__(self, wizard: LMDBWizard) -> None:
        super().__init__()
        self.wiz = wizard
        self.setTitle("Options")
        self.setSubTitle("Where the LMDB goes, and the fixed preprocessing done once, up front.")
        self.setCommitPage(True)

        self.dst_edit = QLineEdit()
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._choose_dst)
        self.dst_state = QLabel()
        self.dst_state.setWordWrap(True)
        dst_box = QWidget()
        dst_grid = QGridLayout(dst_box)
        dst_grid.setContentsMargins(0, 0, 0, 0)
        dst_grid.addWidget(self.dst_edit, 0, 0)
        dst_grid.addWidget(browse, 0, 1)
        dst_grid.addWidget(self.dst_state, 1, 0, 1, 2)

        self.resize_box = QCheckBox("Resize shorter side to")
        self.resize_spin = _spin(8, 8192, 256)
        self.crop_box = QCheckBox("Centre crop to")
        self.crop_w, self.crop_h = _spin(8, 8192, 224), _spin(8, 8192, 224)
        self.rgb_box = QCheckBox("Convert every image to RGB (3 channels)")
        self.rgb_box.setChecked(True)
        self.workers_spin = _spin(1, 256, os.cpu_count() or 1)
        resize_row = _row(self.resize_box, self.resize_spin, QLabel("px"))
        crop_row = _row(self.crop_box, self.crop_w, QLabel("×"), self.crop_h, QLabel("px"))

        self.estimate = QLabel()
        self.estimate.setWordWrap(True)
        self.space = QLabel()
        self.space.setWordWrap(True)

        form = QFormLayout()
        form.addRow("Destination", dst_box)
        form.addRow("Preprocessing", resize_row)
        form.addRow("", crop_row)
        form.addRow("", self.rgb_box)
        form.addRow("Decoding processes", _row(self.workers_spin, QLabel("(one writer besides)")))
        form.addRow("Estimated size", self.estimate)
        form.addRow("Free space", self.space)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addStretch(1)

        self._est_bytes: int | None = None
        self._timer = QTimer(self, singleShot=True, interval=250)
        self._timer.timeout.connect(self._estimate)
        for w in (self.resize_box, self.crop_box, self.rgb_box):
            w.toggled.connect(self._options_changed)
        for w in (self.resize_spin, self.crop_w, self.crop_h):
            w.valueChanged.connect(self._options_changed)
        self.dst_edit.textChanged.connect(self._update_checks)

    def initializePage(self) -> None:  # noqa: N802 - Qt API
        info = self.wiz.info
        if info is not None and not self.dst_edit.text():
            self.dst_edit.setText(default_destination(info))
        self._options_changed()

    def preprocess(self) -> Preprocess:
        return Preprocess(
            resize=self.resize_spin.value() if self.resize_box.isChecked() else None,
            crop=(self.crop_w.value(), self.crop_h.value()) if self.crop_box.isChecked() else None,
            rgb=self.rgb_box.isChecked(),
        )

    def isComplete(self) -> bool:  # noqa: N802 - Qt API
        return self._dst_ok and self._space_ok

    _dst_ok = False
    _space_ok = False

    def _choose_dst(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "LMDB folder", self.dst_edit.text())
        if path:
            self.dst_edit.setText(path)

    def _options_changed(self) -> None:
        self.resize_spin.setEnabled(self.resize_box.isChecked())
        self.crop_w.setEnabled(self.crop_box.isChecked())
        self.crop_h.setEnabled(self.crop_box.isChecked())
        self._est_bytes = None
        self.estimate.setText("estimating…")
        self._timer.start()
        self._update_checks()

    def _estimate(self) -> None:
        spec, pre = self.wiz.spec(), self.preprocess()
        worker = JobWorker(lambda cancel: inspect_source(spec, pre, n_preview=1))
        worker.signals.sig_result.connect(self._on_estimate)
        worker.signals.sig_error.connect(lambda msg: self.estimate.setText(_esc(msg)))
        self.wiz.runner.start(worker, "estimate")

    def _on_estimate(self, info: SourceInfo) -> None:
        self._est_bytes = info.estimated_bytes
        self.estimate.setText(
            f"<b>{_size(info.estimated_bytes)}</b> on disk "
            f"({info.count:,} samples × {_size(info.bytes_per_sample)}, uint8 decoded)"
        )
        self._update_checks()

    def _update_checks(self) -> None:
        dst = self.dst_edit.text().strip()
        self._dst_ok = False
        if not dst:
            self._say(self.dst_state, "Choose a destination folder.", BAD_COLOR)
        else:
            self._dst_ok = self._check_dst(Path(dst).expanduser())
        self._space_ok = self._check_space(Path(dst).expanduser()) if dst else False
        self.completeChanged.emit()

    def _check_dst(self, dst: Path) -> bool:
        try:
            state = destination_state(dst)
        except Exception as exc:  # noqa: BLE001 - shown, not raised
            self._say(self.dst_state, str(exc), BAD_COLOR)
            return False
        if state.kind == "foreign":
            text = f"This destination {state.reason}; choose another."
            self._say(self.dst_state, text, BAD_COLOR)
            return False
        if state.kind in ("missing", "empty"):
            self._say(self.dst_state, "A new LMDB will be created here.", DIM_COLOR)
            return True
        meta = state.meta
        info = self.wiz.info
        if info is None or meta["source"]["spec"] != info.spec:
            self._say(self.dst_state, f"Holds a conversion of {meta['source']['spec']}; "
                      "choose another destination.", BAD_COLOR)  # fmt: skip
            return False
        stored = Preprocess.from_dict(meta["preprocess"])
        if stored != self.preprocess():
            self._say(self.dst_state, "Holds a conversion of this source with other options "
                      f"({stored.describe()}); set those to resume it.", BAD_COLOR)  # fmt: skip
            return False
        if state.complete:
            self._say(self.dst_state, f"Already converted ({meta['count']:,} samples): "
                      "Convert only verifies it.", OK_COLOR)  # fmt: skip
        else:
            done, total = state.progress.get("next_source", 0), meta["source"]["count"]
            text = f"Holds an unfinished conversion of this source ({done:,} of {total:,}): "
            self._say(self.dst_state, text + "it will resume.", OK_COLOR)
        return True

    def _check_space(self, dst: Path) -> bool:
        probe = dst
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        try:
            free = shutil.disk_usage(probe).free
        except OSError as exc:
            self._say(self.space, f"cannot read free space: {exc}", BAD_COLOR)
            return False
        if self._est_bytes is None:
            self._say(self.space, f"{_size(free)} free on {probe}", DIM_COLOR)
            return True
        if self._est_bytes > 0.95 * free:
            text = (f"Only {_size(free)} free on {probe}, the LMDB needs about "
                    f"{_size(self._est_bytes)}: choose another disk or resize.")  # fmt: skip
            self._say(self.space, text, BAD_COLOR)
            return False
        self._say(self.space, f"{_size(free)} free on {probe}: enough.", OK_COLOR)
        return True

    @staticmethod
    def _say(label: QLabel, text: str, color: str) -> None:
        label.setText(f"<span style='color:{color}'>{_esc(text)}</span>")


def default_destination(info: SourceInfo) -> str:
    if info.kind == "folder":
        root = Path(info.spec)
        return str(root.with_name(root.name + ".lmdb"))
    path = Path(info.spec.rsplit(":", 1)[0])
    return str(path.with_name(f"{path.stem}_{info.spec.rsplit(':', 1)[1]}.lmdb"))


# ----------------------------------------------------------------------------- conversion page


class ConvertPage(QWizardPage):
    sig_conversion_finished = Signal(object)

    def __init__(self, wizard: LMDBWizard) -> None:
        super().__init__()
        self.wiz = wizard
        self.setTitle("Conversion")
        self.setSubTitle(
            "Decoding in a process pool, one writer, committed in batches. Cancel keeps what is "
            "done; Resume (or running the same conversion again) continues from there."
        )
        self.bar = QProgressBar()
        self.bar.setMinimumHeight(22)
        self.rate = QLabel(" ")
        self.rate.setFont(_mono())
        self.status = QLabel(" ")
        self.status.setWordWrap(True)
        self.cancel_btn = QPushButton("Cancel conversion")
        self.resume_btn = QPushButton("Resume")
        self.cancel_btn.clicked.connect(self.cancel)
        self.resume_btn.clicked.connect(self.start)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_btn)
        buttons.addWidget(self.resume_btn)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.plan = QLabel()
        self.plan.setWordWrap(True)
        self.plan.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        layout = QVBoxLayout(self)
        layout.addWidget(self.plan)
        layout.addSpacing(8)
        layout.addWidget(self.bar)
        layout.addWidget(self.rate)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addWidget(self.summary)
        layout.addStretch(1)
        self.running = False
        self._t0 = 0.0
        self._first: tuple[float, int] | None = None

    def initializePage(self) -> None:  # noqa: N802 - Qt API
        self.start()

    def isComplete(self) -> bool:  # noqa: N802 - Qt API
        return self.wiz.result is not None and not self.running

    def start(self) -> None:
        src, dst = self.wiz.spec(), self.wiz.destination()
        pre, workers = self.wiz.preprocess(), self.wiz.options_page.workers_spin.value()
        self.wiz.result = None
        self.running = True
        self._first = None
        self._t0 = time.monotonic()
        self.cancel_btn.setEnabled(True)
        self.resume_btn.setEnabled(False)
        self.status.setText("Starting the decoding processes…")
        self.summary.setText("")
        self.plan.setText(
            f"<table cellspacing=3><tr><td><b>From</b></td><td>{_esc(src)}</td></tr>"
            f"<tr><td><b>To</b></td><td>{_esc(dst)}</td></tr>"
            f"<tr><td><b>Preprocessing</b></td><td>{_esc(pre.describe())}</td></tr>"
            f"<tr><td><b>Processes</b></td><td>{workers} decoding + 1 writing</td></tr></table>"
        )
        worker = JobWorker(
            lambda cancel: convert(src, dst, workers=workers, preprocess=pre, cancel=cancel)
        )
        worker.signals.sig_progress.connect(self._on_progress)
        worker.signals.sig_result.connect(self._on_result)
        worker.signals.sig_error.connect(self._on_error)
        worker.signals.sig_cancelled.connect(self._on_cancelled)
        self.wiz.runner.start(worker, "convert")
        self.completeChanged.emit()

    def cancel(self) -> None:
        self.cancel_btn.setEnabled(False)
        self.status.setText("Cancelling: committing what is decoded…")
        self.wiz.runner.cancel("convert")

    def _on_progress(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self._first is None:
            self._first = (now, done)
            self.status.setText(f"Converting {self.wiz.spec()} → {self.wiz.destination()}")
        self.bar.setRange(0, max(total, 1))
        self.bar.setValue(done)
        t, d = self._first
        if now - t > 0.2 and done > d:
            rate = (done - d) / (now - t)
            eta = (total - done) / rate
            self.rate.setText(f"{done:,} / {total:,} samples   {rate:,.0f} samples/s   "
                              f"ETA {_duration(eta)}")  # fmt: skip
        else:
            self.rate.setText(f"{done:,} / {total:,} samples")

    def _finish(self) -> None:
        self.running = False
        self.cancel_btn.setEnabled(False)
        self.completeChanged.emit()

    def _on_result(self, result: ConvertResult) -> None:
        self.wiz.result = result
        self._finish()
        self.resume_btn.setEnabled(False)
        self.bar.setRange(0, max(result.total, 1))
        self.bar.setValue(result.total)
        if result.already_complete:
            self.status.setText("This LMDB was already complete; nothing to convert.")
        else:
            resumed = f", resumed at {result.resumed_from:,}" if result.resumed_from else ""
            rate = f"{result.samples_per_s:,.0f} samples/s{resumed}"
            self.status.setText(
                f"<span style='color:{OK_COLOR}'>Done: {result.count:,} samples in "
                f"{_duration(result.seconds)} ({rate}).</span>"
            )
        skipped = f"{len(result.skipped)} unreadable sample(s) skipped" if result.skipped else (
            "no unreadable samples")  # fmt: skip
        self.summary.setText(
            f"{_esc(result.dst)}: {_size(result.bytes_on_disk)} on disk, {skipped}. "
            "Next: verify and measure."
        )
        self.sig_conversion_finished.emit(result)

    def _on_error(self, message: str) -> None:
        self._finish()
        self.resume_btn.setEnabled(True)
        self.resume_btn.setText("Retry")
        self.status.setText(f"<span style='color:{BAD_COLOR}'>{_esc(message)}</span>")

    def _on_cancelled(self) -> None:
        self._finish()
        self.rate.setText(f"{self.bar.value():,} / {self.bar.maximum():,} samples   stopped")
        self.resume_btn.setEnabled(True)
        self.resume_btn.setText("Resume")
        state = destination_state(self.wiz.destination())
        done = state.progress.get("next_source", 0) if state.progress else 0
        self.status.setText(
            f"Cancelled at {done:,} samples; they are committed. Resume continues from there."
        )


# ----------------------------------------------------------------------------- result page


class ResultPage(QWizardPage):
    def __init__(self, wizard: LMDBWizard) -> None:
        super().__init__()
        self.wiz = wizard
        self.setTitle("Result")
        self.setSubTitle("Checked against the source, and measured against it.")
        self.verify_label = QLabel("Verifying…")
        self.verify_label.setWordWrap(True)
        self.skipped = QListWidget()
        self.skipped.setWordWrap(True)
        self.skipped.setSelectionMode(QListWidget.SelectionMode.NoSelection)
        self.skipped.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.skipped.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.chart = pg.PlotWidget()
        self.chart.setMinimumHeight(170)
        self.chart.setMouseEnabled(False, False)
        self.chart.hideButtons()
        self.chart.setMenuEnabled(False)
        self.chart.getPlotItem().setLabel("left", "samples/s")
        self.chart_note = QLabel("Measuring…")
        self.chart_note.setWordWrap(True)
        self.snippet = QPlainTextEdit()
        self.snippet.setReadOnly(True)
        self.snippet.setFont(_mono())
        self.snippet.setMinimumHeight(176)
        self.snippet.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        copy_btn = QPushButton("Copy")
        copy_btn.clicked.connect(self.copy_snippet)
        self.bars: pg.BarGraphItem | None = None
        self.throughput: Throughput | None = None
        self.verification: VerifyResult | None = None

        left = QVBoxLayout()
        left.addWidget(_heading("Verification"))
        left.addWidget(self.verify_label)
        left.addWidget(_heading("Skipped (unreadable) samples"))
        left.addWidget(self.skipped, 1)
        right = QVBoxLayout()
        right.addWidget(_heading("Throughput, before and after (same DataLoader settings)"))
        right.addWidget(self.chart, 1)
        right.addWidget(self.chart_note)
        top = QHBoxLayout()
        top.addLayout(left, 1)
        top.addLayout(right, 1)
        snippet_head = QHBoxLayout()
        snippet_head.addWidget(_heading("Use it in your training script"))
        snippet_head.addStretch(1)
        snippet_head.addWidget(copy_btn)
        layout = QVBoxLayout(self)
        layout.addLayout(top, 1)
        layout.addLayout(snippet_head)
        layout.addWidget(self.snippet)

    def initializePage(self) -> None:  # noqa: N802 - Qt API
        result = self.wiz.result
        self.skipped.clear()
        for s in result.skipped:
            self.skipped.addItem(f"{s['path']}  —  {s['reason']}")
        if not result.skipped:
            self.skipped.addItem("none: every source sample was readable")
        self.snippet.setPlainText(code_snippet(result.dst, self.wiz.info))
        self.verify_label.setText("Verifying: decoding random source samples again…")
        self.chart_note.setText("Measuring…")
        dst = result.dst
        worker = JobWorker(lambda cancel: verify(dst, n=64, cancel=cancel))
        worker.signals.sig_result.connect(self._on_verified)
        worker.signals.sig_error.connect(self._on_verify_error)
        worker.signals.sig_finished.connect(self._measure)
        self.wiz.runner.start(worker, "verify")

    def _measure(self) -> None:
        if self.wiz.result is None:
            return
        dst = self.wiz.result.dst
        worker = JobWorker(lambda cancel: measure(dst, num_workers=0, seconds=1.5, cancel=cancel))
        worker.signals.sig_result.connect(self._on_measured)
        worker.signals.sig_error.connect(lambda msg: self.chart_note.setText(_esc(msg)))
        self.wiz.runner.start(worker, "measure")

    def _on_verified(self, result: VerifyResult) -> None:
        self.verification = result
        color = OK_COLOR if result.ok else BAD_COLOR
        mark = "✔" if result.ok else "✘"
        lines = [f"<span style='color:{color}'>{mark} {_esc(result.summary())}</span>"]
        lines += [_esc(m) for m in result.mismatches[:5]]
        self.verify_label.setText("<br>".join(lines))

    def _on_verify_error(self, message: str) -> None:
        self.verify_label.setText(f"<span style='color:{BAD_COLOR}'>{_esc(message)}</span>")

    def _on_measured(self, t: Throughput) -> None:
        self.throughput = t
        plot = self.chart.getPlotItem()
        plot.clear()
        heights = np.array([t.before.samples_per_s, t.after.samples_per_s])
        from stallscope.gui import theme

        pal = theme.palette()
        self.bars = pg.BarGraphItem(
            x=np.array([0.0, 1.0]), height=heights, width=0.55,
            brushes=[pg.mkBrush(pal.text_faint), pg.mkBrush(pal.accent)], pen=pg.mkPen(None),
        )  # fmt: skip
        plot.addItem(self.bars)
        for x, h in zip((0, 1), heights, strict=True):
            text = pg.TextItem(f"{h:,.0f}/s", anchor=(0.5, 1.0), color=pal.plot_fg)
            text.setPos(x, h)
            plot.addItem(text)
        plot.getAxis("bottom").setTicks([[(0, "decode per sample"), (1, "LMDBDataset")]])
        plot.setXRange(-0.6, 1.6, padding=0)
        plot.setYRange(0, float(heights.max()) * 1.2 or 1.0, padding=0)
        self.chart_note.setText(
            f"<b>{t.speedup:,.1f}× faster</b>: {t.before.samples_per_s:,.0f} → "
            f"{t.after.samples_per_s:,.0f} samples/s, {t.before.mb_per_s:,.1f} → "
            f"{t.after.mb_per_s:,.1f} MB/s (batch {t.batch_size}, num_workers={t.num_workers}, "
            "shuffled)."
        )

    def copy_snippet(self) -> None:
        QGuiApplication.clipboard().setText(self.snippet.toPlainText())


def code_snippet(dst: str, info: SourceInfo | None) -> str:
    if info is not None and info.kind == "factory":
        unpack = "for sample in loader:"
        comment = f"    # same structure as your dataset: {describe_structure(info.structure)}"
        use = "    ..."
    elif info is not None and not info.classes:
        unpack = "for images in loader:"
        comment = "    # uint8 CHW batches; scale on the GPU, not in the workers"
        use = "    images = images.to(device, non_blocking=True).float().div_(255)"
    else:
        unpack = "for images, labels in loader:"
        comment = "    # uint8 CHW batches; scale on the GPU, not in the workers"
        use = "    images = images.to(device, non_blocking=True).float().div_(255)"
    return "\n".join([
        "from torch.utils.data import DataLoader",
        "from stallscope.core.lmdb.dataset import LMDBDataset",
        "",
        f"dataset = LMDBDataset({str(dst)!r})",
        "loader = DataLoader(dataset, batch_size=256, shuffle=True, num_workers=4,",
        "                    pin_memory=True, persistent_workers=True)",
        unpack,
        comment,
        use,
    ])  # fmt: skip


# ----------------------------------------------------------------------------- helpers


def _thumb(caption: str, image: np.ndarray) -> QWidget:
    h, w = image.shape[:2]
    data = np.ascontiguousarray(image)
    qimg = QImage(data.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy()
    pix = QPixmap.fromImage(qimg).scaled(
        THUMB, THUMB, Qt.AspectRatioMode.KeepAspectRatio,
        Qt.TransformationMode.SmoothTransformation if max(w, h) > THUMB else
        Qt.TransformationMode.FastTransformation,
    )  # fmt: skip
    box = QFrame()
    box.setFrameShape(QFrame.Shape.StyledPanel)
    layout = QVBoxLayout(box)
    layout.setContentsMargins(4, 4, 4, 4)
    picture = QLabel()
    picture.setPixmap(pix)
    picture.setFixedSize(THUMB, THUMB)
    picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
    layout.addWidget(picture)
    head, _, name = caption.rpartition("/")
    for i, line in enumerate((head, name) if head else (name,)):
        text = QLabel()
        font = text.font()
        font.setPointSizeF(font.pointSizeF() * 0.85)
        font.setBold(i == 0 and bool(head))
        text.setFont(font)
        text.setFixedWidth(THUMB)
        text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        text.setText(text.fontMetrics().elidedText(line, Qt.TextElideMode.ElideMiddle, THUMB))
        layout.addWidget(text)
    box.setToolTip(f"{caption}: {w}×{h}")
    return box


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    font = label.font()
    font.setBold(True)
    label.setFont(font)
    label.setContentsMargins(0, 8, 0, 0)
    return label


def _spin(lo: int, hi: int, value: int) -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(lo, hi)
    spin.setValue(value)
    return spin


def _row(*widgets: QWidget) -> QWidget:
    box = QWidget()
    layout = QHBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    for w in widgets:
        layout.addWidget(w)
    layout.addStretch(1)
    box.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
    return box


def _mono() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


def _size(nbytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes:,.0f} B"


def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{max(seconds, 0):.1f} s"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    m, s = divmod(seconds, 60)
    if m < 60:
        return f"{m}:{s:02d}"
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}"


def _esc(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    app = QApplication.instance() or QApplication(sys.argv[:1])
    try:
        from stallscope.gui import theme

        theme.apply_theme(app, theme.saved_mode())
    except Exception:  # noqa: BLE001 - the wizard works unthemed too
        pass
    wizard = open_lmdb_wizard(None, argv[0] if argv else "")
    wizard.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, False)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
