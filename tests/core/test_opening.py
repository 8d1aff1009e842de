"""What a path opens as is decided once (core/document.open_as): a trace, a session, a job's
ranks, every trace of a folder. The CLI's `analyze` shows exactly that kind; the app follows the
same answer (tests/gui/test_opening_app.py). Folders are made in tmp from links to the real
traces and from synth.make_job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from opening_paths import paths

from stallscope.core.document import RANKS, SESSION, TRACE, TRACES, open_as
from stallscope.core.errors import StallscopeError

pytestmark = pytest.mark.runner  # the CLI runs in a child, as a user runs it


def test_each_path_opens_as_one_kind(tmp_path):
    p = paths(tmp_path)
    kinds = {name: open_as(path) for name, path in p.items()}
    assert {name: o.kind for name, o in kinds.items()} == {
        "file": TRACE, "logdir": TRACE, "session": SESSION, "running": SESSION, "job": RANKS}
    assert kinds["session"].session == p["session"] and kinds["logdir"].session is None
    assert kinds["running"].files == []  # a session with no trace yet: its run alone
    assert [label for label, _ in kinds["job"].files] == ["rank 0", "rank 1", "rank 2"]
    assert kinds["job"].in_full
    assert open_as(p["logdir"], every=True).kind == TRACE  # one trace: one report
    assert open_as(p["job"], every=True).kind == TRACES
    with pytest.raises(StallscopeError, match="no such file"):
        open_as(tmp_path / "missing.json")
    with pytest.raises(StallscopeError, match="--run chooses among the runs of a folder"):
        open_as(p["file"], run="1")


def _analyze(path: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "analyze", "--json",
                          str(path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_cli_shows_the_kind_open_as_gives(tmp_path):
    p = paths(tmp_path)
    single = _analyze(p["logdir"])
    assert "devices" in single and "stragglers" not in single and "folder" in single
    job = _analyze(p["job"])
    assert len(job["traces"]) == 3 and "stragglers" in job  # the rank table: a row per rank
    file = _analyze(p["file"])
    assert "folder" not in file and file["devices"] == single["devices"]
    session = _analyze(p["session"])
    assert session["devices"] == single["devices"]
    running = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "analyze",
                              str(p["running"])], capture_output=True, text=True, timeout=300)
    assert running.returncode == 2
    assert running.stderr.strip().splitlines() == [
        f"stallscope: error: {p['running']}: folder holds no trace: the run of train.py "
        "holds no trace and no finished record (still running, or killed)"]
