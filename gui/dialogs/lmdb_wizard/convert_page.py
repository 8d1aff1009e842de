"""Page 3: the conversion, in a process pool off the GUI thread: progress, samples/s, ETA,
Cancel (keeps what is committed) and Resume / Retry."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
)

from stallscope.core import units
from stallscope.core.lmdb.convert import ConvertResult
from stallscope.core.lmdb.destination import destination_state
from stallscope.core.lmdb.fields import field_lines
from stallscope.core.lmdb.notices import notices
from stallscope.gui.dialogs.lmdb_wizard.widgets import Page, esc, mono, say, text_block, toned

if TYPE_CHECKING:
    from stallscope.gui.dialogs.lmdb_wizard.wizard import LMDBWizard


class ConvertPage(Page):
    sig_conversion_finished = Signal(object)

    def __init__(self, wizard: LMDBWizard) -> None:
        super().__init__(wizard, "Conversion", "Decoding in a process pool, one writer, "
                         "committed in batches. Cancel keeps what is done; Resume (or running "
                         "the same conversion again) continues from there.")
        self.bar = QProgressBar()
        self.bar.setMinimumHeight(22)
        self.rate = QLabel(" ")
        self.rate.setFont(mono())
        self.status = text_block(" ")
        self.cancel_btn = QPushButton("Cancel conversion")
        self.resume_btn = QPushButton("Resume")
        self.cancel_btn.clicked.connect(self.cancel)
        self.resume_btn.clicked.connect(self.start)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_btn)
        buttons.addWidget(self.resume_btn)
        self.summary = text_block(selectable=True)
        self.plan = text_block(selectable=True)

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
        self.cancel_btn.setEnabled(True)
        self.resume_btn.setEnabled(False)
        self.status.setText("Starting the decoding processes…")
        self.summary.setText("")
        self.plan.setText(
            f"<table cellspacing=3><tr><td><b>From</b></td><td>{esc(src)}</td></tr>"
            f"<tr><td><b>To</b></td><td>{esc(dst)}</td></tr>"
            f"<tr><td><b>Preprocessing</b></td><td>{esc(pre.describe())}</td></tr>"
            f"<tr><td><b>Processes</b></td><td>{workers} decoding + 1 writing</td></tr></table>"
        )
        self.wiz.jobs.convert(self.wiz.opened_source(), dst, workers, pre,
                              progress=self._on_progress, result=self._on_result,
                              error=self._on_error, cancelled=self._on_cancelled)
        self.completeChanged.emit()

    def cancel(self) -> None:
        self.cancel_btn.setEnabled(False)
        self.status.setText("Cancelling: committing what is decoded…")
        self.wiz.jobs.cancel("convert")

    def _on_progress(self, done: int, total: int) -> None:
        if total == 0:  # the folder's scan (a resumed conversion reads its stored listing)
            self.bar.setRange(0, 0)
            self.rate.setText(f"scanning the source: {done:,} files")
            return
        now = time.monotonic()
        if self._first is None:
            self._first = (now, done)
            self.status.setText(f"Converting {esc(self.wiz.spec())} → "
                                f"{esc(self.wiz.destination())}")
        self.bar.setRange(0, max(total, 1))
        self.bar.setValue(done)
        t, d = self._first
        if now - t > 0.2 and done > d:
            rate = (done - d) / (now - t)
            eta = (total - done) / rate
            self.rate.setText(f"{done:,} / {total:,} samples   {rate:,.0f} samples/s   "
                              f"ETA {units.clock(eta)}")  # fmt: skip
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
            took = (f"{units.duration(result.seconds * 1e6)} "
                    f"({result.samples_per_s:,.0f} samples/s)")
            if result.resumed_from:  # this run's figures, apart from the LMDB's count
                say(self.status, f"Done: {result.count:,} samples; resumed at "
                    f"{result.resumed_from:,}, this run converted {result.converted_now:,} "
                    f"in {took}.", "ok")
            else:
                say(self.status, f"Done: {result.count:,} samples in {took}.", "ok")
        skipped = f"{len(result.skipped)} unreadable sample(s) skipped" if result.skipped else (
            "no unreadable samples")  # fmt: skip
        if result.scan_skipped:
            skipped += f", {len(result.scan_skipped)} path(s) not listed (loops, not files)"
        per = result.bytes_on_disk / max(result.count, 1)
        fields = "".join(f"<br>&nbsp;&nbsp;{esc(line)}" for line in field_lines(result.fields))
        said = "".join(f"<br>{_notice(line)}" for line in notices(result))
        self.summary.setText(
            f"{esc(result.dst)}: {units.size(result.bytes_on_disk)} on disk ({per:,.0f} B per "
            f"sample), {skipped}. Stored as:{fields}{said}<br>Next: verify and measure."
        )
        self.sig_conversion_finished.emit(result)

    def _on_error(self, message: str) -> None:
        self._finish()
        self.resume_btn.setEnabled(True)
        self.resume_btn.setText("Retry")
        say(self.status, message, "bad")

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


def _notice(line: str) -> str:
    """A conversion's notice (notices()) as rich text: a warning marked, a note dimmed."""
    if line.startswith("warning: "):
        return f"<b>⚠</b> {esc(line[len('warning: '):])}"
    return toned(line.removeprefix("note: "), "dim")
