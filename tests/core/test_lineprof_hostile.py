"""Hostile line stats in a received session: `lineprof/*.json` that is a symlink to /dev/zero, a
FIFO, a link out of the session or a sparse 1 GiB file, and a `file` field naming a device or a
FIFO. Each ends in one line (exit 2) or a clean table with a warning, in bounded time and memory;
and nothing from them reaches the terminal raw."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from hostile_files import cli_with_peak

from stallscope.core import lineprof
from stallscope.core.lineprof import session_stats

sys.path.insert(0, str(Path(__file__).parent))
from test_lineprof import DS, make_profile  # noqa: E402  (tests/core is not a package)

pytestmark = pytest.mark.runner  # the CLI runs in a child process

MiB = 2**20


def _session(tmp_path: Path) -> tuple[Path, Path]:
    """A session folder (run.json at its top) and its lineprof/ folder."""
    session = tmp_path / "session"
    (session / "lineprof").mkdir(parents=True)
    (session / "run.json").write_text(json.dumps({"script": "train.py"}))
    return session, session / "lineprof"


def _good(tmp_path: Path, folder: Path, **fields) -> Path:
    p = make_profile(tmp_path, DS, {3: (10, 0.02), 4: (10, 0.06), 5: (10, 0.001)})
    obj = {**p.to_json(), **fields}
    path = folder / "Ds.__getitem__.json"
    path.write_text(json.dumps(obj))
    return path


def _one_line(rc, err, *words):
    assert rc == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err


@pytest.mark.parametrize("make, words", [
    (lambda d, out: (d / "x.json").symlink_to("/dev/zero"),
     "points outside its folder (/dev/zero)"),
    (lambda d, out: os.mkfifo(d / "x.json"), "is a FIFO"),
    (lambda d, out: (d / "x.json").symlink_to(out), "points outside its folder"),
    (lambda d, out: os.truncate(_touch(d / "x.json"), 1 << 30), "1,024.0 MiB, larger than"),
])
def test_a_sessions_hostile_line_stats_file_is_one_line(tmp_path, make, words):
    session, folder = _session(tmp_path)
    outside = _good(tmp_path, tmp_path)  # a real line-stats file, outside the session
    make(folder, outside)
    rc, out, err, seconds, peak = cli_with_peak("lineprof", session, timeout=60)
    _one_line(rc, err, str(folder / "x.json"), words)
    assert seconds < 30 and peak < 400 * MiB, (seconds, peak)  # nothing read unbounded
    # the analysis of a trace of that session still loads: its advice simply has no line stats,
    # and the reason is kept for the app's heatmap tab
    stats = session_stats(session)
    assert stats.for_advice is None and stats.session == session
    assert str(folder / "x.json") in stats.error and words in stats.error


def _touch(p: Path) -> Path:
    p.write_text("")
    return p


@pytest.mark.parametrize("target, why", [
    ("/dev/zero", "is a character device, not a regular file"),
    ("fifo", "is a FIFO, not a regular file"),
])
def test_a_file_field_naming_a_device_or_fifo_is_not_read(tmp_path, target, why):
    session, folder = _session(tmp_path)
    if target == "fifo":
        target = str(tmp_path / "src.py")
        os.mkfifo(target)
    _good(tmp_path, folder, file=target)
    rc, out, err, seconds, peak = cli_with_peak("lineprof", session, timeout=60)
    assert rc == 0, err
    assert f"{target}: source file {why}; showing the code as profiled" in out
    assert "b = decode(a)" in out  # the code as profiled
    assert seconds < 30 and peak < 400 * MiB, (seconds, peak)
    # what the app reads (off the GUI thread) carries the same warning
    _, profiles = lineprof.read_stats(session)
    assert profiles[0].match.warning.startswith(f"{target}: source file {why}")


def test_a_source_file_over_the_cap_is_not_read(tmp_path):
    p = make_profile(tmp_path, DS, {3: (10, 0.02)})
    os.truncate(p.file, 64 * MiB)  # sparse: no disk used
    m = lineprof.match_source(p)
    assert "source file 64.0 MiB, larger than the 8.0 MiB read of such a file" in m.warning


def test_line_stats_never_reach_the_terminal_raw(tmp_path):
    session, folder = _session(tmp_path)
    evil = "Ds\x1b]0;pwned\x07\x1b[2J\u202egnp.exe"
    path = _good(tmp_path, folder, qualname=evil, function=evil)
    obj = json.loads(path.read_text())
    obj["lines"][1]["source"] = "        a = load(i)  \x1b[8mhidden\x1b[0m"
    path.write_text(json.dumps(obj))
    rc, out, err, _, _ = cli_with_peak("lineprof", session)
    assert rc == 0, err
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in out and raw not in err
    assert "Ds\\x1b]0;pwned\\x07\\x1b[2J\\u202egnp.exe" in out
    assert "a = load(i)  \\x1b[8mhidden\\x1b[0m" in out


def test_a_session_keeps_its_readable_line_stats_and_names_the_others(tmp_path):
    session, folder = _session(tmp_path)
    _good(tmp_path, folder)
    os.mkfifo(folder / "fifo.json")
    (folder / "zero.json").symlink_to("/dev/zero")
    profiles = lineprof.load_session(session)
    assert [p.qualname for p in profiles] == ["Ds.__getitem__"]
    assert profiles[0].warnings == [
        f"not read: {folder / 'fifo.json'}: is a FIFO, not a regular file",
        f"not read: {folder / 'zero.json'}: points outside its folder (/dev/zero), not read"]


def test_a_line_stats_file_of_many_lines_is_printed_in_linear_time(tmp_path):
    """70,000 lines (14 MiB, under the cap): every per-line figure from one pass (a share that
    summed the whole function per line took minutes)."""
    session, folder = _session(tmp_path)
    lines = [{"lineno": i, "hits": 1, "total_s": 0.001, "source": "y" * 150}
             for i in range(1, 70_000)]
    _good(tmp_path, folder, lines=lines, file=str(tmp_path / "gone.py"))
    rc, out, err, seconds, peak = cli_with_peak("lineprof", session, timeout=120)
    assert rc == 0, err
    assert out.count("\n") > 70_000 and seconds < 30, seconds
    assert peak < 400 * MiB, peak
    profile = lineprof.load_session(session)[0]
    assert len(lineprof.match_lines(profile, profile)) == 69_999
