"""The rank job view: fills as ranks finish (a process pool off the GUI thread), sorts by
straggler wait, names the injected slow rank and its cause, opens one rank's full trace, cancels,
and runs standalone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fixture_traces import fixture_path
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from synth import make_job

from stallscope.gui.controllers.ranks import RanksController
from stallscope.gui.views.rank_model import COLUMNS, HELD
from stallscope.gui.views.ranks import RanksView, row_colors

pytestmark = pytest.mark.runner  # a process pool per rank; the controller standalone in a child

SLOW = 4


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ranks")
    make_job(folder, 6, fixture_path("hta_sampled_rank-0"), repeat=1, slow_rank=SLOW,
             slow_us=12_000.0, jitter_us=200.0, seed=5)
    (folder / "README.txt").write_text("six ranks")
    return folder


@pytest.fixture
def view(qtbot):
    v = RanksView(details=True)
    ctl = RanksController(v, workers=2)
    v.bind(ctl)
    qtbot.addWidget(v)
    v.resize(1200, 800)
    v.show()
    return v, ctl


def _run(qtbot, view, folder):
    v, ctl = view
    rows_seen = []
    ctl.sig_rank_finished.connect(lambda i, r: rows_seen.append(v.model.rowCount()))
    with qtbot.waitSignal(ctl.sig_job_finished, timeout=120_000) as blocker:
        ctl.open_folder(str(folder))
    return blocker.args[0], rows_seen


def test_table_fills_as_ranks_finish_and_names_the_straggler(qtbot, view, job_dir, tmp_path):
    v, ctl = view
    job, rows_seen = _run(qtbot, view, job_dir)
    assert rows_seen == [1, 2, 3, 4, 5, 6]  # a row per finished rank, before the job ended
    assert v.progress.value() == 6 and v.progress.format() == "6 / 6 ranks"
    assert v.row_keys()[0] == f"rank {SLOW}"  # sorted by held-others-up, largest first
    first = v.proxy.index(0, 0)
    assert first.data() == f"rank {SLOW}  ◀ slowest"
    assert first.data(Qt.ItemDataRole.BackgroundRole).color().name() == row_colors()[0]
    held = v.proxy.index(0, HELD).data()
    assert held.endswith("ms") and 11.5 <= float(held.split()[0]) <= 12.5
    text = v.straggler.text()
    assert f"rank {SLOW}, last to reach" in text and "data loading" in text
    assert "README.txt: not a trace file by name" in v.skipped.toPlainText()
    # the others keep rank order under equal (zero) straggler wait
    assert v.row_keys()[1:] == [f"rank {r}" for r in range(6) if r != SLOW]
    png = tmp_path / "ranks.png"
    assert v.grab().save(str(png))
    assert QImage(str(png)).width() == v.width()


def test_columns_sort_by_their_numbers(qtbot, view, job_dir):
    v, _ = view
    job, _ = _run(qtbot, view, job_dir)
    col = COLUMNS.index("waited/step")
    v.table.sortByColumn(col, Qt.SortOrder.AscendingOrder)
    waits = {k: f.waited_us for k, f in job.stragglers.ranks.items()}
    assert v.row_keys() == sorted(waits, key=lambda k: (waits[k], int(k.split()[1])))
    v.table.sortByColumn(0, Qt.SortOrder.DescendingOrder)
    assert v.row_keys() == [f"rank {r}" for r in range(5, -1, -1)]


def test_opening_a_rank_loads_its_full_trace(qtbot, view, job_dir):
    v, ctl = view
    job, _ = _run(qtbot, view, job_dir)
    v.table.selectRow(0)
    assert v.open_button.isEnabled()
    with qtbot.waitSignal(ctl.sig_rank_document_loaded, timeout=60_000) as blocker:
        v.open_button.click()
    doc = blocker.args[0]
    slow_path = next(s.path for s in job.summaries if s.key == f"rank {SLOW}")
    report = doc.reports[0]
    assert str(report.trace.path) == slow_path and report.trace.n_events > 4000
    assert report.trace.rank == SLOW
    assert f"(rank {SLOW})" in v.details.toPlainText()


def test_cancel_and_errors_end_in_a_line(qtbot, view, job_dir, tmp_path):
    v, ctl = view
    with qtbot.waitSignal(ctl.sig_job_cancelled, timeout=60_000):
        ctl.open_folder(str(job_dir))
        ctl.sig_plan_ready.connect(lambda _p: ctl.cancel())
    qtbot.waitUntil(lambda: not ctl.busy, timeout=30_000)
    assert "(cancelled)" in v.status.text() and not v.cancel_button.isEnabled()
    empty = tmp_path / "empty"
    empty.mkdir()
    with qtbot.waitSignal(ctl.sig_job_failed, timeout=30_000) as blocker:
        ctl.open_folder(str(empty))
    assert blocker.args[0] == f"{empty}: folder is empty"
    assert "folder is empty" in v.straggler.text()


def test_runs_standalone(job_dir, tmp_path):
    out = tmp_path / "standalone.png"
    done = subprocess.run([sys.executable, "-m", "stallscope.gui.controllers.ranks", str(job_dir),
                           "--workers", "2", "--screenshot", str(out)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert done.returncode == 0, done.stderr
    img = QImage(str(out))
    assert (img.width(), img.height()) == (1200, 860)


def test_the_hint_to_open_a_rank_is_whole_in_the_view_at_1024x700(qtbot, job_dir):
    """In a 1024x700 window the Ranks tab says how to open a rank in the view itself (the
    status bar cut that sentence off), wrapped, and nothing in the view is clipped."""
    from PySide6.QtWidgets import QApplication
    from reference_images import clipped_labels
    from shots import save_shot

    v = RanksView()
    ctl = RanksController(v, workers=2)
    v.bind(ctl)
    qtbot.addWidget(v)
    v.resize(1000, 610)  # the tab's area in a 1024x700 window
    v.show()
    assert not v.hint.isVisibleTo(v)
    with qtbot.waitSignal(ctl.sig_job_finished, timeout=120_000):
        ctl.open_folder(str(job_dir))
    QApplication.processEvents()
    assert v.hint.isVisibleTo(v) and v.hint.text().startswith("Double-click a rank")
    assert v.hint.heightForWidth(v.hint.width()) <= v.hint.height()
    bottom = v.hint.mapTo(v, v.hint.rect().bottomLeft()).y()
    assert bottom <= v.height()
    assert clipped_labels(v) == []
    save_shot(v, "ranks_view_hint_1024x700")
