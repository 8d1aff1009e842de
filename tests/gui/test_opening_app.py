"""The app opens a path as the kind core/document.open_as gives (the CLI's rule too,
tests/core/test_opening.py): a trace or a log folder as one document, a session as its trace
plus its run replay, a session without a trace yet as its run alone, a small job's ranks in
full. The job of many ranks routes to the Ranks tab (tests/gui/test_ranks_route.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from opening_paths import paths
from shots import save_shot

from stallscope.core.document import RANKS, SESSION, TRACE
from stallscope.gui.views.run import RunView


def _run_tabs(window) -> list[str]:
    return [window.tabs.tabText(i) for i in range(window.tabs.count())
            if isinstance(window.tabs.widget(i), RunView)]


@pytest.mark.parametrize("name, kind, runs", [
    ("file", TRACE, []), ("logdir", TRACE, []), ("session", SESSION, ["Run: session"]),
    ("job", RANKS, [])])
def test_a_path_opens_as_its_kind(tmp_path, open_and_wait, window, name, kind, runs):
    path = paths(tmp_path)[name]
    doc = open_and_wait(path)
    assert doc.opening is not None and doc.opening.kind == kind
    assert len(doc.reports) == (3 if kind == RANKS else 1) and doc.multi_rank == (kind == RANKS)
    assert _run_tabs(window) == runs


def test_a_session_without_a_trace_opens_as_its_run(qtbot, tmp_path, window):
    path = paths(tmp_path)["running"]
    with qtbot.waitSignal(window.controller.sig_session, timeout=60_000):
        window.open_path(str(path))
    assert _run_tabs(window) == ["Run: running"] and window.document is None


def test_open_session_replays_once(qtbot, tmp_path, open_and_wait, window):
    path = paths(tmp_path)["session"]
    with qtbot.waitSignal(window.controller.sig_session, timeout=60_000):
        window.open_session(str(path))
    assert _run_tabs(window) == ["Run: session"]


@pytest.mark.runner  # the CLI runs in a child, as a user runs it
def test_a_small_job_in_full_states_the_clis_straggler_sentence(tmp_path, open_and_wait, window):
    path = paths(tmp_path)["job"]
    open_and_wait(path)
    cli = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "analyze", str(path)],
                         capture_output=True, text=True, timeout=600)
    [line] = [s for s in cli.stdout.splitlines() if s.startswith("Straggler: ")]
    shown = window.analysis.straggler
    assert shown.isVisible() and shown.text() == line
    straggler = line.removeprefix("Straggler: ").split(",")[0]  # "rank 2"
    [marked] = [row.label for row in window.analysis.rank_table.rows if row.slowest]
    assert marked == straggler  # the table marks the rank the sentence names
    save_shot(window, "analysis_small_job_straggler")


def test_a_session_whose_trace_is_empty_says_why_over_the_open_document(qtbot, tmp_path,
                                                                         open_and_wait, window):
    # the status bar said "Loading trace ..." for good and no line named the empty trace (the
    # CLI does): a Run tab appeared beside the previous document, unexplained
    made = paths(tmp_path)
    doc = open_and_wait(made["file"])
    broken = made["running"]
    (broken / "traces").mkdir()
    (broken / "traces" / "train.20240501-101502-123.pt.trace.json.gz").write_bytes(b"")
    with qtbot.waitSignal(window.controller.sig_nothing_to_show, timeout=60_000):
        window.open_path(str(broken))
    qtbot.waitUntil(lambda: "file is empty" in window.messages.text)
    assert "Loading" not in window.status_bar.currentMessage()
    assert "train.20240501-101502-123.pt.trace.json.gz (file is empty)" in window.messages.text
    assert "The open document stays as it was." in window.messages.text
    assert window.document is doc and _run_tabs(window) == ["Run: running"]
    # a run whose replay fails too: both lines, the replay's first
    (broken / "run.json").write_text("")
    with qtbot.waitSignal(window.controller.sig_nothing_to_show, timeout=60_000):
        window.open_path(str(broken))
    lines = window.messages.text.splitlines()
    assert lines[0].startswith("Could not replay the session: ") and "file is empty" in lines[1]
