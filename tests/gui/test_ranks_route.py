"""A folder of many ranks in the main window: File > Open folder of ranks and a plain open of a
folder whose plan picks a job of more than RANKS_IN_FULL ranks both land in the Ranks tab (per-rank
summaries on a process pool, the table filling as ranks finish), nothing is loaded in full until
a rank is opened; a small job keeps the analysis view's rank combo. Also: the analysis view's
rank table keeps its rank column whole at 1024x700."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import shutil

import pytest
from fixture_traces import fixture_path
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QApplication, QFileDialog
from shots import save_shot
from synth import make_job

from stallscope.core.document import RANKS, RANKS_IN_FULL, TRACES, open_as

SLOW = 7


@pytest.fixture(scope="module")
def job10(tmp_path_factory):
    folder = tmp_path_factory.mktemp("job10")
    make_job(folder, 10, fixture_path("hta_sampled_rank-0"), slow_rank=SLOW, slow_us=15_000.0,
             jitter_us=200.0, seed=3)
    return folder


def _shot(widget, name: str) -> None:
    save_shot(widget, f"wire_{name}")


def test_the_rule_is_more_than_a_handful_of_ranks_of_one_job(tmp_path):
    template = fixture_path("hta_sampled_rank-0")
    at, over = tmp_path / "eight", tmp_path / "nine"
    make_job(at, RANKS_IN_FULL, template)
    make_job(over, RANKS_IN_FULL + 1, template)
    assert RANKS_IN_FULL == 8
    small, big = open_as(at), open_as(over)
    assert small.kind == big.kind == RANKS  # a job's ranks either way (the CLI's rule too)
    assert small.in_full and not big.in_full
    every = open_as(over, every=True)
    assert every.kind == TRACES and len(every.files) == RANKS_IN_FULL + 1  # --all: each trace


@pytest.mark.runner  # the rank folder is analysed in a process pool
def test_opening_a_big_rank_folder_routes_to_the_ranks_tab(qtbot, window, job10):
    window.resize(1024, 700)
    view, ctl = window.ranks._make()  # made on the first route; made here to watch it fill
    rows_when_finished, routed = [], []
    ctl.sig_rank_finished.connect(lambda *_: rows_when_finished.append(view.model.rowCount()))
    window.controller.sig_ranks_folder.connect(lambda *a: routed.append(a))
    with qtbot.waitSignals([window.controller.sig_ranks_folder, ctl.sig_job_finished],
                           timeout=180_000):
        window.open_path(str(job10))
    [(path, plan)] = routed
    assert window.tabs.currentWidget() is view
    assert path == str(job10) and len(plan.picks) == 10
    assert window.document is None and window.analysis.report is None  # nothing loaded in full
    assert rows_when_finished == list(range(1, 11))  # a row per rank as it finished
    assert view.model.rowCount() == 10 and view.progress.format() == "10 / 10 ranks"
    assert view.row_keys()[0] == f"rank {SLOW}"  # the straggler first
    assert f"rank {SLOW}, last to reach" in view.straggler.text()
    assert window.tabs.tabText(window.tabs.currentIndex()) == f"Ranks: {job10.name}"
    assert f"the slowest is rank {SLOW}" in window.status_bar.currentMessage()
    _shot(window, "ranks_tab_1024x700")
    # opening a rank loads its full trace into the analysis view
    view.table.selectRow(0)
    with qtbot.waitSignal(window.sig_document_shown, timeout=60_000) as shown:
        view.open_button.click()
    doc = shown.args[0]
    slow_file = next(s.path for s in view.job.summaries if s.key == f"rank {SLOW}")
    assert str(doc.path) == slow_file and doc.reports[0].trace.rank == SLOW
    assert window.tabs.currentWidget() is window.analysis
    assert not window.analysis.rank_combo.isVisibleTo(window)  # one rank, in full
    # closing the tab keeps the view (reused for the next folder)
    window.close_tab(window.tabs.indexOf(view))
    QApplication.processEvents()
    assert window.tabs.indexOf(view) < 0 and window.ranks.view is view
    assert view.model.rowCount() == 10  # not deleted


@pytest.mark.runner  # the rank folder is analysed in a process pool
def test_file_menu_opens_a_folder_of_ranks(qtbot, window, job10, monkeypatch):
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(job10))
    view, ctl = window.ranks._make()
    routed = []
    window.controller.sig_ranks_folder.connect(lambda *a: routed.append(a))
    with qtbot.waitSignal(ctl.sig_job_finished, timeout=180_000) as done:
        window.actions_by_name["Open folder of ranks"].trigger()
    job = done.args[0]
    assert routed == []  # straight to the ranks controller, whatever the count
    assert len(job.summaries) == 10 and window.tabs.currentWidget() is view
    assert job.stragglers.slowest.key == f"rank {SLOW}"


def test_a_small_rank_folder_keeps_the_rank_combo(qtbot, window, tmp_path, open_and_wait):
    folder = tmp_path / "two"
    folder.mkdir()
    for r in (0, 1):
        shutil.copy(fixture_path(f"hta_sampled_rank-{r}"), folder)
    routed = []
    window.controller.sig_ranks_folder.connect(lambda *a: routed.append(a))
    doc = open_and_wait(folder)
    assert doc.labels == ["rank 0", "rank 1"] and routed == []
    assert window.ranks.view is None
    assert window.analysis.rank_combo.isVisibleTo(window)


def test_rank_table_keeps_the_rank_whole_at_1024x700(qtbot, window, tmp_path, open_and_wait):
    folder = tmp_path / "two"
    folder.mkdir()
    for r in (0, 1):
        shutil.copy(fixture_path(f"hta_sampled_rank-{r}"), folder)
    window.resize(1024, 700)
    open_and_wait(folder)
    QApplication.processEvents()
    table = window.analysis.rank_table
    for row in range(table.rowCount()):
        item = table.item(row, 0)
        need = QFontMetrics(item.font()).horizontalAdvance(item.text())
        assert need + 8 <= table.columnWidth(0), (item.text(), need, table.columnWidth(0))
    header = table.horizontalHeader()
    assert header.length() <= table.viewport().width()  # fits: no sideways scrolling
    assert table.horizontalScrollBar().maximum() == 0
    _shot(window, "rank_table_1024x700")
    # squeezed below what the columns need: they keep their widths and the table scrolls
    window.analysis.splitter.setSizes([360, 664])
    QApplication.processEvents()
    assert table.viewport().width() < sum(table._natural)
    assert [table.columnWidth(c) for c in range(table.columnCount())] == table._natural
    assert table.horizontalScrollBar().maximum() > 0
    # every row stays in view above the scroll bar
    assert table.height() >= (header.height() + table.verticalHeader().length()
                              + table.horizontalScrollBar().sizeHint().height())


@pytest.mark.runner  # the rank folder is analysed in a process pool
def test_wait_for_load_waits_for_the_routed_ranks(qtbot, window, job10):
    """The command line's --screenshot waits with wait_for_load: it must see the ranks done."""
    window.open_path(str(job10))
    assert window.wait_for_load(timeout_ms=180_000)
    view = window.ranks.view
    assert view.job is not None and view.model.rowCount() == 10
    assert not window.controller.busy and not window.ranks.controller.busy
