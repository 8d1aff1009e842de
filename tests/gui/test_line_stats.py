"""LineStatsController: line stats read off the GUI thread, one slot per key (a newer load
supersedes an older one), errors as one line naming the file, pickles only when trusted."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import threading
import time
from pathlib import Path

from stallscope.core import lineprof
from stallscope.gui.controllers import line_stats
from stallscope.gui.controllers.line_stats import LineStats, LineStatsController

DS = "class Ds:\n    def __getitem__(self, i):\n        a = load(i)\n        return decode(a)\n"


def make_session(root: Path, decode_s: float = 0.06) -> Path:
    """A session folder with a trace under traces/ and one line-stats file."""
    (root / "traces").mkdir(parents=True)
    (root / "traces" / "host.pt.trace.json").write_text('{"traceEvents": []}')
    src = root / "ds.py"
    src.write_text(DS)
    lines = [lineprof.Line(2, 0, 0.0, "    def __getitem__(self, i):"),
             lineprof.Line(3, 10, 0.02, "        a = load(i)"),
             lineprof.Line(4, 10, decode_s, "        return decode(a)")]
    profile = lineprof.Profile("__getitem__", "Ds.__getitem__", str(src), 2, lines, samples=10)
    lineprof.save(profile, root / "lineprof" / "Ds.__getitem__.json")
    return root


def test_a_trace_in_a_session_loads_its_stats_off_the_gui_thread(qtbot, tmp_path, monkeypatch):
    session = make_session(tmp_path / "run-1")
    threads = []
    real = lineprof.read_stats

    def spy(path, **kw):
        threads.append(threading.current_thread())
        return real(path, **kw)

    monkeypatch.setattr(lineprof, "read_stats", spy)
    ctl = LineStatsController()
    bare = tmp_path / "bare.json"
    bare.write_text('{"traceEvents": []}')
    with qtbot.waitSignal(ctl.sig_stats_loaded, timeout=20_000) as sig:
        ctl.load([session / "traces" / "host.pt.trace.json", bare], "session", optional=True)
    key, (found, none) = sig.args
    assert key == "session"
    assert threads and all(t is not threading.main_thread() for t in threads)
    assert found.session == session and found.name == "run-1"
    assert [p.qualname for p in found.profiles] == ["Ds.__getitem__"]
    assert found.profiles[0].total_s == lineprof.load_session(session)[0].total_s == 0.08
    assert none == LineStats(str(bare), None, []) and none.name == "bare.json"
    qtbot.waitUntil(lambda: not ctl.busy, timeout=5_000)


def test_errors_are_one_line_naming_the_file_and_pickles_need_trust(qtbot, tmp_path):
    ctl = LineStatsController()
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with qtbot.waitSignal(ctl.sig_stats_failed, timeout=20_000) as sig:
        ctl.load(bad, "open")
    assert sig.args[0] == "open"
    assert str(bad) in sig.args[1] and "not JSON" in sig.args[1] and "\n" not in sig.args[1]

    from line_profiler import LineStats as KernprofStats

    src = tmp_path / "ds.py"
    src.write_text(DS)
    lprof = tmp_path / "run.lprof"
    KernprofStats({(str(src), 2, "Ds.__getitem__"): [(3, 5, 2_000_000)]}, 1e-9).to_file(lprof)
    with qtbot.waitSignal(ctl.sig_stats_failed, timeout=20_000) as sig:
        ctl.load(lprof, "open")
    assert "pickle" in sig.args[1] and str(lprof) in sig.args[1]
    with qtbot.waitSignal(ctl.sig_stats_loaded, timeout=20_000) as sig:
        ctl.load(lprof, "open", trust_pickle=True)
    (stats,) = sig.args[1]
    assert stats.session is None and stats.name == "run.lprof"
    assert stats.profiles[0].line(3).hits == 5 and stats.profiles[0].line(3).total_s == 0.002


def test_a_newer_load_supersedes_the_older_one(qtbot, tmp_path, monkeypatch):
    slow = make_session(tmp_path / "slow", decode_s=0.5)
    fast = make_session(tmp_path / "fast", decode_s=0.1)
    real = line_stats.read_all

    def read_all(paths, trust_pickle, optional):
        if "slow" in paths[0]:
            time.sleep(0.8)
        return real(paths, trust_pickle, optional)

    monkeypatch.setattr(line_stats, "read_all", read_all)
    ctl = LineStatsController()
    got = []
    ctl.sig_stats_loaded.connect(lambda key, result: got.append((key, result[0].name)))
    ctl.load(slow, "heatmap")
    ctl.load(fast, "heatmap")
    ctl.load(slow, "other")  # another key is not superseded
    qtbot.waitUntil(lambda: len(got) == 2, timeout=20_000)
    qtbot.wait(1000)  # the superseded slow "heatmap" load has finished by now, and was dropped
    assert sorted(got) == [("heatmap", "fast"), ("other", "slow")]
    assert not ctl.busy
