"""Line-stats format: JSON round trip, kernprof .lprof files, source matching, the CLI table,
and the heaviest line the advice names."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stallscope.core import lineprof
from stallscope.core.cli import main as cli_main
from stallscope.core.errors import StallscopeError

pytestmark = pytest.mark.runner  # kernprof and scripts in child processes

SCRIPT = textwrap.dedent('''
    import math


    @profile
    def work(n):
        total = 0
        for i in range(n):
            total += math.sqrt(i)
        s = sorted(str(i) for i in range(n))
        return total, len(s)


    def main():
        for _ in range(3):
            work(20000)


    main()
''')


@pytest.fixture(scope="module")
def kernprof_file(tmp_path_factory) -> Path:
    """A real .lprof made by kernprof on a small script."""
    folder = tmp_path_factory.mktemp("kp")
    script = folder / "script.py"
    script.write_text(SCRIPT)
    out = folder / "script.lprof"
    proc = subprocess.run([sys.executable, "-m", "kernprof", "-l", "-o", str(out), str(script)],
                          capture_output=True, text=True, cwd=folder, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return out


def make_profile(tmp_path: Path, source: str, times: dict[int, tuple[int, float]],
                 qualname="Ds.__getitem__", samples=10) -> lineprof.Profile:
    """A profile of `source` (written to a file) as the capture writes it."""
    file = tmp_path / "ds.py"
    file.write_text(source)
    src = source.splitlines()
    first = next(i for i, s in enumerate(src, 1) if s.lstrip().startswith("def __getitem__"))
    lines = [lineprof.Line(n, *times.get(n, (0, 0.0)), src[n - 1])
             for n in range(first, len(src) + 1)]
    return lineprof.Profile("__getitem__", qualname, str(file), first, lines, samples=samples,
                            workers=2)


DS = textwrap.dedent('''\
    class Ds:
        def __getitem__(self, i):
            a = load(i)
            b = decode(a)
            return b
''')


def test_json_round_trip_keeps_every_field(tmp_path):
    p = make_profile(tmp_path, DS, {3: (10, 0.02), 4: (10, 0.06), 5: (10, 0.001)})
    path = lineprof.save(p, tmp_path / "lineprof" / "Ds.__getitem__.json")
    obj = json.loads(path.read_text())
    assert obj["version"] == 1 and obj["samples"] == 10 and obj["workers"] == 2
    assert obj["total_s"] == pytest.approx(0.081)
    assert obj["lines"][2] == {"lineno": 4, "hits": 10, "total_s": 0.06,
                               "source": "        b = decode(a)"}
    q = lineprof.load(path)
    assert q.to_json() == p.to_json()
    assert q.top_lines(2)[0].lineno == 4 and q.share(q.line(4)) == pytest.approx(0.06 / 0.081)


@pytest.mark.parametrize("content,words", [
    ("{not json", "not JSON"),
    ('{"a": 1}', "not a stallscope line-stats file"),
    ('{"qualname": "x", "lines": [{"lineno": "x"}]}', "malformed line entry"),
    ('{"version": 9, "qualname": "x", "lines": []}', "newer stallscope"),
])
def test_bad_json_names_the_file(tmp_path, content, words):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(lineprof.LineprofError) as err:
        lineprof.load(path)
    assert str(path) in str(err.value) and words in str(err.value)


def test_lprof_is_refused_without_trust(kernprof_file):
    with pytest.raises(lineprof.LineprofError, match="pickle"):
        lineprof.load_lprof(kernprof_file)
    with pytest.raises(StallscopeError, match="--trust-pickle"):
        lineprof.load_any(kernprof_file)


def test_lprof_from_kernprof_matches_its_own_numbers(kernprof_file):
    (p,) = lineprof.load_lprof(kernprof_file, trust_pickle=True)
    assert p.qualname == "work" and p.file.endswith("script.py")
    from line_profiler import LineStats

    truth = LineStats.from_files(kernprof_file)
    ((key, entries),) = truth.timings.items()
    assert p.first_line == key[1]
    for lineno, hits, t in entries:
        ln = p.line(lineno)
        assert ln.hits == hits and ln.total_s == pytest.approx(t * truth.unit)
    assert p.samples == 3  # the first body line ran once per call
    assert p.line(key[1]).source == "@profile"  # kernprof's first line is the decorator
    assert p.line(key[1] + 2).source.strip() == "total = 0"
    assert p.warnings == []


def test_lprof_unpickler_refuses_anything_but_line_stats(tmp_path):
    evil = tmp_path / "evil.lprof"
    evil.write_bytes(pickle.dumps(os.system))  # would be a callable from os, not stats
    with pytest.raises(lineprof.LineprofError, match="refusing to load"):
        lineprof.load_lprof(evil, trust_pickle=True)


def test_lprof_warns_when_the_source_is_newer(kernprof_file, tmp_path):
    copy = tmp_path / "copy.lprof"
    copy.write_bytes(kernprof_file.read_bytes())
    (p,) = lineprof.load_lprof(copy, trust_pickle=True)
    script = Path(p.file)
    old = copy.stat().st_mtime
    os.utime(script, (old + 10, old + 10))
    try:
        (p,) = lineprof.load_lprof(copy, trust_pickle=True)
        assert any("changed after these stats were written" in w for w in p.warnings)
    finally:
        os.utime(script, (old - 10, old - 10))


def test_source_changed_since_the_run_is_matched_by_content(tmp_path):
    p = make_profile(tmp_path, DS, {3: (10, 0.02), 4: (10, 0.06), 5: (10, 0.001)})
    assert lineprof.match_source(p).warning is None
    Path(p.file).write_text(DS.replace("    def __getitem__",
                                       "    # a comment\n\n    def __getitem__")
                            .replace("return b", "return b * 2"))
    m = lineprof.match_source(p)
    assert m.changed
    assert m.current[3] == 5 and m.current[4] == 6  # moved down two lines
    assert m.current[5] is None  # that line is no longer in the file
    assert "ds.py changed since the run" in m.warning
    assert "2 timed lines now at other line numbers" in m.warning
    assert "1 timed line no longer in the file (profiled line 5)" in m.warning
    os.remove(p.file)
    assert "source file not found" in lineprof.match_source(p).warning


def test_cli_prints_a_kernprof_table_and_json(tmp_path, capsys):
    p = make_profile(tmp_path, DS, {3: (10, 0.02), 4: (10, 0.06), 5: (10, 0.001)})
    lineprof.save(p, tmp_path / "session" / "lineprof" / "Ds.__getitem__.json")
    assert cli_main(["lineprof", str(tmp_path / "session")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Total time: 0.081 s"
    assert "Samples: 10 (8.100 ms/sample), merged over 2 worker processes" in out
    one = make_profile(tmp_path, DS, {3: (10, 0.02)})
    one.workers = 1
    assert "merged over 1 worker process\n" in lineprof.format_table(one)  # not "processes"
    header = next(i for i, s in enumerate(out) if s.startswith("Line #"))
    assert out[header].split() == ["Line", "#", "Hits", "Time", "Per", "Hit", "%", "Time",
                                   "Line", "Contents"]
    row = out[header + 4].split()  # line 4: 10 hits, 60000 us, 6000 us per hit, 74.1 %
    assert row[:5] == ["4", "10", "60000.0", "6000.0", "74.1"]
    assert out[header + 2].split() == ["2", "def", "__getitem__(self,", "i):"]
    assert out[header + 3].split() == ["3", "10", "20000.0", "2000.0", "24.7", "a", "=",
                                       "load(i)"]
    assert cli_main(["lineprof", str(tmp_path / "session"), "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["qualname"] == "Ds.__getitem__" and obj["lines"][2]["hits"] == 10


def test_cli_lprof_needs_trust_pickle(kernprof_file, capsys):
    assert cli_main(["lineprof", str(kernprof_file)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stallscope: error: ") and "--trust-pickle" in err
    assert err.count("\n") == 1
    assert cli_main(["lineprof", str(kernprof_file), "--trust-pickle"]) == 0
    assert "Function: work at line" in capsys.readouterr().out


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert cli_main(["lineprof", str(tmp_path)]) == 2
    assert "no line stats here" in capsys.readouterr().err
    assert cli_main(["lineprof", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_heaviest_line_names_the_slowest_line(tmp_path):
    session = tmp_path / "s"
    assert lineprof.heaviest_line(session) is None
    p = make_profile(tmp_path, DS, {3: (10, 0.02), 4: (10, 0.06), 5: (10, 0.001)})
    lineprof.save(p, session / "lineprof" / "Ds.__getitem__.json")
    func, lineno, source, share = lineprof.heaviest_line(session)
    assert (func, lineno, source) == ("Ds.__getitem__", 4, "b = decode(a)")
    assert share == pytest.approx(0.06 / 0.081)


def test_heaviest_line_follows_a_profiled_helper(tmp_path):
    session = tmp_path / "s"
    p = make_profile(tmp_path, DS, {3: (10, 0.02), 4: (10, 0.06), 5: (10, 0.001)})
    lineprof.save(p, session / "lineprof" / "Ds.__getitem__.json")
    helper = lineprof.Profile("decode", "decode", p.file, 10, [
        lineprof.Line(10, 0, 0.0, "def decode(a):"),
        lineprof.Line(11, 10, 0.045, "    img = Image.open(a).convert('RGB')"),
        lineprof.Line(12, 10, 0.015, "    return img")], samples=10, root=False)
    lineprof.save(helper, session / "lineprof" / "decode.json")
    func, lineno, source, share = lineprof.heaviest_line(session)
    assert (func, lineno) == ("decode", 11) and source.startswith("img = Image.open")
    assert share == pytest.approx(0.045 / 0.081)


def test_line_profiler_check_in_another_interpreter(tmp_path):
    assert lineprof.line_profiler_missing(sys.executable) is None
    # An interpreter that cannot import line_profiler: a plain venv without it.
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True,
                   timeout=60)
    python = str(bare / "bin" / "python")
    msg = lineprof.line_profiler_missing(python)
    assert msg is not None and f"{python} -m pip install line_profiler" in msg
    assert lineprof.install_command(python) == [python, "-m", "pip", "install", "line_profiler"]


def test_match_lines_pairs_same_number_and_text_then_moved_text(tmp_path):
    before = make_profile(tmp_path, DS, {3: (10, 0.02), 4: (10, 0.06), 5: (10, 0.001)})
    moved = DS.replace("a = load(i)\n", "a = load(i)\n        a.check()\n")
    after_dir = tmp_path / "after"
    after_dir.mkdir()
    after = make_profile(after_dir, moved, {3: (10, 0.02), 4: (10, 0.01), 5: (10, 0.05)})
    matched = lineprof.match_lines(after, before)
    assert {n: ln.lineno for n, ln in matched.items()} == {2: 2, 3: 3, 5: 4, 6: 5}
    assert 4 not in matched  # a.check() is new
    assert matched[5] is before.line(4)  # "b = decode(a)" moved from line 4 to 5
    assert lineprof.common_indent(after.lines) == 4  # the method's lines, flush left


def test_read_stats_finds_the_session_of_a_trace_or_reads_the_file(tmp_path):
    session = tmp_path / "run"
    (session / "traces").mkdir(parents=True)
    trace = session / "traces" / "host.pt.trace.json"
    trace.write_text("{}")
    assert lineprof.read_stats(trace, optional=True) == (None, [])
    with pytest.raises(lineprof.LineprofError):
        lineprof.read_stats(trace)  # not line stats, and no session with them
    p = make_profile(tmp_path, DS, {3: (10, 0.02), 4: (10, 0.06)})
    json_path = lineprof.save(p, session / "lineprof" / "Ds.__getitem__.json")
    for path in (trace, session, json_path):
        found, profiles = lineprof.read_stats(path)
        assert found == session and [q.to_json() for q in profiles] == [p.to_json()]
    lone = lineprof.save(p, tmp_path / "elsewhere" / "x.json")
    found, (q,) = lineprof.read_stats(lone)
    assert found is None and q.total_s == pytest.approx(0.08)
    assert not lineprof.needs_trust(lone) and not lineprof.needs_trust(session)


def test_evidence_is_pure_and_heaviest_line_reads_the_same_from_a_session(tmp_path):
    p = make_profile(tmp_path, DS, {3: (10, 0.02), 4: (10, 0.06), 5: (10, 0.001)})
    assert lineprof.evidence([]) == "" and lineprof.heaviest_line_of([]) is None
    text = lineprof.evidence([p])
    assert text == (" Line heatmap: the heaviest line is Ds.__getitem__ line 4 (`b = decode(a)`), "
                    "74% of the time in __getitem__.")
    session = tmp_path / "s"
    lineprof.save(p, session / "lineprof" / "Ds.__getitem__.json")
    assert lineprof.heaviest_line(session) == lineprof.heaviest_line_of([p])
    assert lineprof.heaviest_line(tmp_path / "nowhere") is None
