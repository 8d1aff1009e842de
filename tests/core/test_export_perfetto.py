"""`stallscope-cli export TRACE --perfetto OUT`: valid Chrome trace JSON, the original events
kept, idle slices that add up to each device's idle, and the same figures when reopened."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from fixture_traces import fixture_path

from stallscope.core import cli
from stallscope.core.analysis import analyze
from stallscope.core.causes import CAUSES
from stallscope.core.render.perfetto import PID, merged_idle
from stallscope.core.trace import load

TRACES = ("kineto_nw0", "hta_rank-0", "hta_cpu_only", "hta_amd")


def original_events(path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)["traceEvents"]


@pytest.mark.parametrize("name", TRACES)
def test_export_reopens_with_identical_figures(tmp_path, capsys, name):
    src = fixture_path(name)
    out = tmp_path / "annotated.json"
    assert cli.main(["export", str(src), "--perfetto", str(out)]) == 0
    assert "stallscope events" in capsys.readouterr().err
    doc = json.loads(out.read_text(encoding="utf-8"))  # valid JSON, Chrome trace shape
    events = doc["traceEvents"]
    ours = [e for e in events if e.get("pid") == PID]
    theirs = [e for e in events if e.get("pid") != PID]
    assert theirs == original_events(src)  # every original event, unchanged and in order
    before = analyze(load(src)).to_json()
    after = analyze(load(out)).to_json()
    before.pop("trace")
    after.pop("trace")
    assert after == before
    report = analyze(load(src))
    for i, stats in enumerate(report.devices.values()):
        idle = [e for e in ours if e.get("tid") == 10 + i and e["ph"] == "X"]
        assert idle and all(e["name"].startswith("idle: ") for e in idle)
        assert sum(e["dur"] for e in idle) == pytest.approx(stats.idle_us, rel=1e-9, abs=1e-3)
        by_cause: dict[str, float] = {}
        for e in idle:
            by_cause[e["args"]["cause"]] = by_cause.get(e["args"]["cause"], 0.0) + e["dur"]
        for cause, us in stats.idle_by_cause.items():
            assert by_cause.get(cause, 0.0) == pytest.approx(us, rel=1e-9, abs=1e-3)
        # merged: no two touching slices of one cause
        idle.sort(key=lambda e: e["ts"])
        for a, b in zip(idle, idle[1:], strict=False):
            assert not (a["args"]["cause"] == b["args"]["cause"]
                        and a["ts"] + a["dur"] == b["ts"])
    steps = [e for e in ours if e.get("tid") == 1 and e["ph"] == "X"]
    assert len(steps) == len(report.steps)
    cards = [e for e in ours if e["ph"] == "i"]
    assert [c["name"] for c in cards] == [a.title for a in report.advice]


def test_export_gzip_and_session_folder_and_bad_input(tmp_path, capsys):
    src = fixture_path("kineto_nw0")
    out = tmp_path / "a.json.gz"
    assert cli.main(["export", str(src), "--perfetto", str(out)]) == 0
    with gzip.open(out, "rt") as f:
        assert len(json.load(f)["traceEvents"]) > len(original_events(src))
    capsys.readouterr()
    assert cli.main(["export", str(tmp_path / "missing.json"), "--perfetto",
                     str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.json" in err[0]
    assert cli.main(["export", str(out), "--perfetto", str(out)]) == 2
    assert "overwrite" in capsys.readouterr().err


def test_merged_idle_joins_touching_pieces_of_one_cause():
    spans = np.array([[0, 1], [1, 2], [2, 3], [5, 6], [6, 7]], dtype=float)
    codes = np.array([1, 1, 2, 2, 2])
    merged, merged_codes = merged_idle(codes, spans)
    assert merged.tolist() == [[0, 2], [2, 3], [5, 7]]
    assert merged_codes.tolist() == [1, 2, 2]
    assert CAUSES[merged_codes[0]]


def test_export_job_reports_progress_and_cancels_cleanly(tmp_path):
    from stallscope.core.errors import Cancelled
    from stallscope.core.jobs import CancelFlag, run_job
    from stallscope.core.render.perfetto import write_perfetto_job

    src = fixture_path("hta_rank-0")
    report = analyze(load(src))
    seen = []
    out = tmp_path / "a.json"
    added = run_job(write_perfetto_job(report, out), lambda d, t: seen.append((d, t)))
    assert added > 0 and seen and seen[-1][0] <= seen[-1][1] == src.stat().st_size
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    flag = CancelFlag()
    flag.set()
    with pytest.raises(Cancelled):
        run_job(write_perfetto_job(report, tmp_path / "b.json", flag))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]  # no part file left
