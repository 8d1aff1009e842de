"""Page 4: the result, checked against the source (verify) and measured against it (samples/s
before and after, one bar each), the skipped samples, and the reader code to copy."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QHBoxLayout,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
)

from stallscope.core.lmdb.measure import Throughput, speed_words
from stallscope.core.lmdb.snippet import lmdb_snippet
from stallscope.core.lmdb.verify import VerifyResult
from stallscope.gui import theme
from stallscope.gui.dialogs.lmdb_wizard.widgets import (
    Page,
    esc,
    heading,
    mono,
    say,
    text_block,
    toned,
)

if TYPE_CHECKING:
    from stallscope.gui.dialogs.lmdb_wizard.wizard import LMDBWizard


class ResultPage(Page):
    def __init__(self, wizard: LMDBWizard) -> None:
        super().__init__(wizard, "Result", "Checked against the source, and measured against it.")
        self.verify_label = text_block("Verifying…")
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
        self.chart_note = text_block("Measuring…")
        self.snippet = QPlainTextEdit()
        self.snippet.setReadOnly(True)
        self.snippet.setFont(mono())
        self.snippet.setMinimumHeight(176)
        self.snippet.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        copy_btn = QPushButton("Copy")
        copy_btn.clicked.connect(self.copy_snippet)
        self.bars: pg.BarGraphItem | None = None
        self.throughput: Throughput | None = None
        self.verification: VerifyResult | None = None

        left = QVBoxLayout()
        left.addWidget(heading("Verification"))
        left.addWidget(self.verify_label)
        left.addWidget(heading("Skipped (unreadable) samples"))
        left.addWidget(self.skipped, 1)
        right = QVBoxLayout()
        right.addWidget(heading("Throughput, before and after (same DataLoader settings)"))
        right.addWidget(self.chart, 1)
        right.addWidget(self.chart_note)
        top = QHBoxLayout()
        top.addLayout(left, 1)
        top.addLayout(right, 1)
        snippet_head = QHBoxLayout()
        snippet_head.addWidget(heading("Use it in your training script"))
        snippet_head.addStretch(1)
        snippet_head.addWidget(copy_btn)
        layout = QVBoxLayout(self)
        layout.addLayout(top, 1)
        layout.addLayout(snippet_head)
        layout.addWidget(self.snippet)

    def initializePage(self) -> None:  # noqa: N802 - Qt API
        result = self.wiz.result
        assert result is not None  # the convert page goes on only with a result
        self.skipped.clear()
        for s in result.skipped:
            self.skipped.addItem(f"{s['path']}  —  {s['reason']}")
        if not result.skipped:
            self.skipped.addItem("none: every source sample was readable")
        self.snippet.setPlainText(lmdb_snippet(result.dst))
        self.verify_label.setText("Verifying: every record's checksum, then random source "
                                  "samples decoded again…")  # fmt: skip
        self.chart_note.setText("Measuring once verification is done…")
        self.wiz.jobs.verify(result.dst, result=self._on_verified, error=self._on_verify_error,
                             finished=self._measure)

    def _measure(self) -> None:
        if self.wiz.result is None:
            return
        dst = self.wiz.result.dst
        self.chart_note.setText("Measuring: the original pipeline and the LMDB, cold then warm, "
                                "in a DataLoader as the snippet below sets it up…")  # fmt: skip
        self.wiz.jobs.measure(dst, result=self._on_measured,
                              error=lambda msg: self.chart_note.setText(esc(msg)))

    def _on_verified(self, result: VerifyResult) -> None:
        self.verification = result
        mark = "✔" if result.ok else "✘"
        lines = [toned(f"{mark} {result.summary()}", "ok" if result.ok else "bad")]
        lines += [esc(m) for m in (result.damaged + result.mismatches)[:5]]
        self.verify_label.setText("<br>".join(lines))

    def _on_verify_error(self, message: str) -> None:
        say(self.verify_label, message, "bad")

    def _on_measured(self, t: Throughput) -> None:
        self.throughput = t
        plot = self.chart.getPlotItem()
        plot.clear()
        heights = np.array([t.before.samples_per_s, t.after.samples_per_s])
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
        plot.getAxis("bottom").setTicks([[(0, t.before.name), (1, "LMDBDataset")]])
        plot.setXRange(-0.6, 1.6, padding=0)
        plot.setYRange(0, float(heights.max()) * 1.2 or 1.0, padding=0)
        cold = ""
        if (t.cold_speedup is not None and t.before_cold is not None
                and t.after_cold is not None):  # measured together
            cold = (f"<br>Cold page cache: {t.before_cold.samples_per_s:,.0f} → "
                    f"{t.after_cold.samples_per_s:,.0f} samples/s, "
                    f"{esc(speed_words(t.cold_speedup))}.")  # fmt: skip
        self.chart_note.setText(
            f"<b>{esc(t.verdict())}</b> warm: {t.before.samples_per_s:,.0f} → "
            f"{t.after.samples_per_s:,.0f} samples/s, {t.before.mb_per_s:,.1f} → "
            f"{t.after.mb_per_s:,.1f} MB/s (batch {t.batch_size}, num_workers={t.num_workers}, "
            f"shuffled, {esc(t.collate)}).{cold}"
            + (f"<br>{toned(t.caveat(), 'dim')}" if t.caveat() else "")
        )
        if self.wiz.result is not None:
            self.snippet.setPlainText(lmdb_snippet(self.wiz.result.dst, t.num_workers,
                                                   t.batch_size))  # fmt: skip

    def copy_snippet(self) -> None:
        QGuiApplication.clipboard().setText(self.snippet.toPlainText())
