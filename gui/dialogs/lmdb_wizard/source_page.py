"""Page 1: the source (an image folder or file.py:factory), inspected off the GUI thread, with
thumbnails after the chosen preprocessing and the detected fields and classes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from stallscope.core import units
from stallscope.core.lmdb.inspection import SourceInfo
from stallscope.core.lmdb.snippet import factory_candidates
from stallscope.core.lmdb.structure import describe
from stallscope.gui.dialogs.lmdb_wizard.widgets import (
    Page,
    esc,
    heading,
    say,
    text_block,
    thumb,
    toned,
)

if TYPE_CHECKING:
    from stallscope.gui.dialogs.lmdb_wizard.wizard import LMDBWizard


class SourcePage(Page):
    def __init__(self, wizard: LMDBWizard) -> None:
        super().__init__(wizard, "Source", "An image folder (class subfolders become labels) "
                         "or a Python factory `file.py:factory` that returns a map-style Dataset.")
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

        self.status = text_block("Choose a folder of images or a factory.")
        self.details = text_block(selectable=True)
        self.thumbs = QGridLayout()
        self.thumbs.setSpacing(10)
        thumbs_box = QWidget()
        thumbs_box.setLayout(self.thumbs)

        self._sections = [heading("Preview (after the chosen preprocessing)"), thumbs_box,
                          heading("Detected"), self.details]  # fmt: skip
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
            self._show_status("Choose a folder of images or a factory.", "info")
            return
        self._show_status("Inspecting…", "info")
        self._pending = spec
        self.wiz.jobs.inspect(spec, self.wiz.preprocess(), progress=self._on_scan_progress,
                              result=self._on_info, error=self._on_error)

    def _on_scan_progress(self, done: int, _total: int) -> None:
        if self._pending == self.spec():
            self._show_status(f"Scanning the folder: {done:,} image files so far…", "info")

    def _on_info(self, info: SourceInfo) -> None:
        if self._pending != self.spec():
            return
        self.wiz.info = info
        self._inspected_spec = self.spec()
        kind = "Image folder" if info.kind == "folder" else "Factory dataset"
        classes = f" in {len(info.classes)} classes" if info.classes else ""
        self._show_status(f"{kind}: {info.count:,} samples{classes}.", "ok")
        lines = ["<b>Fields, as stored</b>:"] + [f"&nbsp;&nbsp;{esc(f)}" for f in info.field_info]
        if info.kind == "factory":
            lines.append(f"<b>Structure</b>: {esc(describe(info.structure))}")
        if info.classes:
            shown = ", ".join(info.classes[:12])
            more = f" … and {len(info.classes) - 12} more" if len(info.classes) > 12 else ""
            lines.append(f"<b>Classes</b>: {esc(shown)}{more}")
        lines.append(f"<b>Stored per sample</b>: {units.size(info.bytes_per_sample)} decoded")
        if info.varied:  # the survey itself, not one sample's size beside a warning
            lines.append(f"<b>Sizes sampled</b> ({esc(info.fields[0])}):")
            lines += [f"&nbsp;&nbsp;{esc(line)}" for line in info.survey_lines()]
        if info.shape_line():
            lines.append(toned(info.shape_line(), "bad" if info.varied else "info"))
        for note in info.notes[:4]:
            lines.append(toned(note, "bad"))
        self.details.setText("<br>".join(lines))
        self._fill_thumbs(info.preview)
        for widget in self._sections:
            widget.setVisible(True)
        self._sections[0].setVisible(bool(info.preview))
        self.completeChanged.emit()

    def _on_error(self, message: str) -> None:
        self._show_status(message, "bad")
        self._fill_thumbs([])
        self.details.setText("")
        for widget in self._sections:
            widget.setVisible(False)

    def _show_status(self, text: str, tone: str) -> None:
        say(self.status, text, tone)

    def _fill_thumbs(self, preview) -> None:
        while self.thumbs.count():
            item = self.thumbs.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        for i, (caption, image) in enumerate(preview):
            self.thumbs.addWidget(thumb(caption, image), i // 6, i % 6)
