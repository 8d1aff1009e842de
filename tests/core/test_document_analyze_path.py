"""document.analyze_path: load, the session's line stats, analyse, in one call (the CLI, run's
summary, the rank tasks); the Document keeps the line stats it read for the heatmap, read once."""

from __future__ import annotations

import shutil
from pathlib import Path

from test_lineprof import DS, make_profile  # tests/core is on the path (not a package)

from stallscope.core import lineprof
from stallscope.core.analysis import analyze
from stallscope.core.document import analyze_path, load_document_job
from stallscope.core.jobs import run_job
from stallscope.core.lineprof import files as lineprof_files
from stallscope.core.ranks.tasks import analyze_rank
from stallscope.core.trace import load


def _session(tmp_path: Path, real_trace) -> tuple[Path, Path]:
    """A session folder: run.json, kineto_nw0 under traces/, one line-stats file."""
    session = tmp_path / "session"
    (session / "traces").mkdir(parents=True)
    (session / "run.json").write_text('{"script": "train.py"}')
    trace = session / "traces" / "host.1623143089861.pt.trace.json.gz"
    shutil.copy(real_trace("kineto_nw0"), trace)
    profile = make_profile(tmp_path, DS, {3: (10, 0.02), 4: (10, 0.06), 5: (10, 0.001)})
    lineprof.save(profile, session / "lineprof" / "Ds.__getitem__.json")
    return session, trace


def _cards(report) -> list[tuple[str, str]]:
    return [(a.id, a.evidence) for a in report.advice]


def test_analyze_path_gives_the_advice_its_line_stats(tmp_path, real_trace):
    session, trace = _session(tmp_path, real_trace)
    by_hand = analyze(load(trace), line_stats=lineprof.load_session(session))
    without = analyze(load(trace))
    got = analyze_path(trace)
    assert _cards(got) == _cards(by_hand)
    assert _cards(got) != _cards(without)  # the line stats change what the advice says
    assert any("decode(a)" in evidence for _, evidence in _cards(got))
    summary = analyze_rank(str(trace), "rank 0")  # the rank tasks use it too
    assert [a["evidence"] for a in summary.report["advice"]] == [e for _, e in _cards(got)]
    assert summary.step_ms() == sum(s.dur_us for s in got.steps) / len(got.steps) / 1000


def test_the_document_keeps_the_line_stats_it_read_once(tmp_path, real_trace, monkeypatch):
    session, trace = _session(tmp_path, real_trace)
    reads = []
    real = lineprof_files.load_session
    monkeypatch.setattr(lineprof_files, "load_session",
                        lambda path: reads.append(Path(path)) or real(path))
    doc = run_job(load_document_job(session))
    assert reads == [session]  # the advice's and the heatmap's: one read
    stats = doc.line_stats
    assert stats.session == session and stats.error is None
    assert [p.qualname for p in stats.profiles] == ["Ds.__getitem__"]
    assert stats.profiles[0].match is not None  # matched to its source, as the heatmap shows
    assert _cards(doc.reports[0]) == _cards(analyze_path(trace))


def test_a_trace_outside_any_session_has_no_line_stats(tmp_path, real_trace):
    trace = tmp_path / "a.pt.trace.json.gz"
    shutil.copy(real_trace("kineto_nw0"), trace)
    doc = run_job(load_document_job(trace))
    assert doc.line_stats == lineprof.SessionStats()
    assert _cards(doc.reports[0]) == _cards(analyze(load(trace)))


def test_unreadable_line_stats_keep_their_reason(tmp_path, real_trace):
    session, trace = _session(tmp_path, real_trace)
    (session / "lineprof" / "Ds.__getitem__.json").write_text("{not json")
    doc = run_job(load_document_job(trace))
    assert doc.line_stats.profiles == [] and doc.line_stats.session == session
    assert "Ds.__getitem__.json: not JSON" in doc.line_stats.error
    assert _cards(doc.reports[0]) == _cards(analyze(load(trace)))  # advice without them
