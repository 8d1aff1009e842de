"""Page 2: where the LMDB goes (checked: new, resumable or refused), the fixed preprocessing,
decoding processes, the estimated size and the free space."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from stallscope.core import units
from stallscope.core.lmdb.destination import check_destination, check_space
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.inspection import RGB_FIX, SourceInfo
from stallscope.core.lmdb.snippet import default_destination
from stallscope.gui.dialogs.lmdb_wizard.widgets import (
    Page,
    esc,
    row,
    say,
    spin,
    text_block,
    toned,
)
from stallscope.gui.widgets import set_rich

if TYPE_CHECKING:
    from stallscope.gui.dialogs.lmdb_wizard.wizard import LMDBWizard

FLOATS = ("auto", "float32", "float16")  # the floats combo's entries, in order


def _sizes(suggestion: str) -> int | None:
    """The side S of a survey's '--resize S --crop S' suggestion (None: no resize in it)."""
    parts = suggestion.split()
    if "--resize" not in parts[:-1]:
        return None
    side = parts[parts.index("--resize") + 1]
    return int(side) if side.isdigit() else None


class OptionsPage(Page):
    def __init__(self, wizard: LMDBWizard) -> None:
        super().__init__(wizard, "Options",
                         "Where the LMDB goes, and the fixed preprocessing done once, up front.")
        self.setCommitPage(True)

        self.dst_edit = QLineEdit()
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._choose_dst)
        self.dst_state = text_block()
        dst_box = QWidget()
        dst_grid = QGridLayout(dst_box)
        dst_grid.setContentsMargins(0, 0, 0, 0)
        dst_grid.addWidget(self.dst_edit, 0, 0)
        dst_grid.addWidget(browse, 0, 1)
        dst_grid.addWidget(self.dst_state, 1, 0, 1, 2)

        self.resize_box = QCheckBox("Resize shorter side to")
        self.resize_spin = spin(8, 8192, 256)
        self.crop_box = QCheckBox("Centre crop to")
        self.crop_w, self.crop_h = spin(8, 8192, 224), spin(8, 8192, 224)
        self.rgb_box = QCheckBox("Convert every image to RGB (3 channels)")
        self.rgb_box.setChecked(True)
        self.workers_spin = spin(1, 256, os.cpu_count() or 1)
        resize_row = row(self.resize_box, self.resize_spin, QLabel("px"))
        crop_row = row(self.crop_box, self.crop_w, QLabel("×"), self.crop_h, QLabel("px"))

        self.floats_combo = QComboBox()
        self.floats_combo.addItems(["auto: uint8 when on k/255 steps", "float32", "float16"])
        self.floats_row = row(QLabel("Float tensors"), self.floats_combo)
        self.estimate = text_block()
        self.shapes = text_block()
        self.apply_btn = QPushButton()
        self.apply_btn.setVisible(False)
        self.apply_btn.clicked.connect(self._apply_suggestion)
        self.space = text_block()

        form = QFormLayout()
        form.addRow("Destination", dst_box)
        form.addRow("Preprocessing", resize_row)
        form.addRow("", crop_row)
        form.addRow("", self.rgb_box)
        form.addRow("", self.floats_row)
        form.addRow("Decoding processes", row(self.workers_spin, QLabel("(one writer besides)")))
        form.addRow("Sizes seen", self.shapes)
        form.addRow("", row(self.apply_btn))
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
        for box in (self.resize_spin, self.crop_w, self.crop_h):
            box.valueChanged.connect(self._options_changed)
        self.floats_combo.currentIndexChanged.connect(self._options_changed)
        self.dst_edit.textChanged.connect(self._update_checks)

    def initializePage(self) -> None:  # noqa: N802 - Qt API
        info = self.wiz.info
        if info is not None and not self.dst_edit.text():
            self.dst_edit.setText(default_destination(info))
        self.floats_row.setVisible(info is not None and info.kind == "factory")
        self._options_changed()

    def preprocess(self) -> Preprocess:
        return Preprocess(
            resize=self.resize_spin.value() if self.resize_box.isChecked() else None,
            crop=(self.crop_w.value(), self.crop_h.value()) if self.crop_box.isChecked() else None,
            rgb=self.rgb_box.isChecked(),
            floats=FLOATS[self.floats_combo.currentIndex()],
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
        self.wiz.jobs.estimate(self.wiz.opened_source(), self.preprocess(),
                               result=self._on_estimate,
                               error=lambda msg: self.estimate.setText(esc(msg)))

    def _on_estimate(self, info: SourceInfo) -> None:
        self._est_bytes = info.estimated_bytes
        fields = "<br>".join(esc(line) for line in info.field_info)
        self.estimate.setText(
            f"<b>{units.size(info.estimated_bytes)}</b> on disk "
            f"({info.count:,} samples × {units.size(info.bytes_per_sample)}), stored as:<br>"
            f"{fields}"
        )
        lines = [toned(info.shape_line() or "-", "bad" if info.varied else "info")]
        if info.padded:
            lines.append(toned(f"warning: {info.padded}", "bad"))
        set_rich(self.shapes, "<br>".join(lines))  # toned escaped each line
        self._suggestion = _sizes(info.suggestion)
        self._to_rgb = RGB_FIX in info.suggestion
        todo = []
        if self._suggestion:
            side = self._suggestion
            todo.append(f"Resize shorter side to {side} and crop {side}×{side}")
        if self._to_rgb:
            todo.append("convert every image to RGB" if todo else "Convert every image to RGB")
        self.apply_btn.setText(", and ".join(todo))
        self.apply_btn.setVisible(bool(todo))
        self._update_checks()

    _suggestion: int | None = None

    _to_rgb = False

    def _apply_suggestion(self) -> None:
        if self._to_rgb:
            self.rgb_box.setChecked(True)
        side = self._suggestion
        if side is None:
            return
        self.resize_box.setChecked(True)
        self.resize_spin.setValue(side)
        self.crop_box.setChecked(True)
        self.crop_w.setValue(side)
        self.crop_h.setValue(side)

    def _update_checks(self) -> None:
        dst = self.dst_edit.text().strip()
        self._dst_ok = False
        if not dst:
            say(self.dst_state, "Choose a destination folder.", "bad")
        else:
            self._dst_ok = self._check_dst(Path(dst).expanduser())
        self._space_ok = self._check_space(Path(dst).expanduser()) if dst else False
        self.completeChanged.emit()

    def _check_dst(self, dst: Path) -> bool:
        info = self.wiz.info
        verdict = check_destination(dst, info.spec if info else None, self.preprocess())
        say(self.dst_state, verdict.text, verdict.tone)
        return verdict.ok

    def _check_space(self, dst: Path) -> bool:
        verdict = check_space(dst, self._est_bytes)
        say(self.space, verdict.text, verdict.tone)
        return verdict.ok
