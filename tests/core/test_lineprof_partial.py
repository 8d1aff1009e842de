"""A line-stats file with one bad field keeps its good entries: the bad field is left out and
named, with the file, in one warning (the CLI's table, the app's heatmap)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hostile_files import cli_with_peak

from stallscope.core import lineprof

sys.path.insert(0, str(Path(__file__).parent))
from test_lineprof import DS, make_profile  # noqa: E402  (tests/core is not a package)

pytestmark = pytest.mark.runner  # the CLI runs in a child process


def _session_with(tmp_path: Path, edit) -> tuple[Path, Path]:
    session = tmp_path / "session"
    (session / "lineprof").mkdir(parents=True)
    (session / "run.json").write_text(json.dumps({"script": "train.py"}))
    p = make_profile(tmp_path, DS, {3: (10, 0.02), 4: (10, 0.06), 5: (10, 0.001)})
    obj = p.to_json()
    edit(obj)
    path = session / "lineprof" / "Ds.__getitem__.json"
    path.write_text(json.dumps(obj))
    return session, path


def _bad_hits(obj: dict) -> None:
    obj["lines"][3]["hits"] = "many"  # line 5 (lines start at the def, line 2)
    obj["samples"] = "ten"


def test_one_bad_line_entry_and_field_leave_the_rest_standing(tmp_path):
    session, path = _session_with(tmp_path, _bad_hits)
    rc, out, err, _seconds, _peak = cli_with_peak("lineprof", session, timeout=60)
    assert rc == 0, err
    assert "b = decode(a)" in out  # line 4, a good entry, in the table
    warning = next(line for line in out.splitlines() if "left out" in line)
    assert str(path) in warning
    assert "lines[3]: 'hits' is \"many\", not a whole number" in warning
    assert "'samples' is \"ten\", not a whole number" in warning
    # the app reads the same (off the GUI thread): the good lines and the warning
    _, profiles = lineprof.read_stats(session)
    assert [ln.lineno for ln in profiles[0].lines if ln.hits] == [3, 4]
    assert profiles[0].samples == 0
    assert any(str(path) in w and "lines[3]" in w for w in profiles[0].warnings)


def test_a_file_whose_every_line_entry_is_bad_is_still_refused_in_one_line(tmp_path):
    def all_bad(obj: dict) -> None:
        for ln in obj["lines"]:
            ln["total_s"] = "slow"

    session, path = _session_with(tmp_path, all_bad)
    rc, _out, err, _seconds, _peak = cli_with_peak("lineprof", path, timeout=60)
    assert rc == 2 and err.count("\n") == 1, err
    assert str(path) in err and "'total_s' is \"slow\", not a number" in err
