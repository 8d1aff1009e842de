"""One folder policy: `info DIR`, `load(DIR)`, `find_traces` and `analyze DIR` pick the same
trace, the one core/folder.py plans (Kineto's stamp, then the trace's clock, then mtime), even
where the files' mtimes say otherwise."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from stallscope.core.errors import NoTraceInFolder, TraceError
from stallscope.core.folder import plan_folder
from stallscope.core.trace import find_traces, load, resolve

pytestmark = pytest.mark.runner  # the CLI in a child process

CLI = [sys.executable, "-m", "stallscope.core.cli"]
OLD, NEW, OLDEST = "1623212756351", "1623213129365", "1623143089861"  # Kineto's stamps (ms)


def _cli(*args):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=180)


@pytest.fixture
def folder(tmp_path, real_trace):
    """Three traces whose mtime order is the reverse of their stamps, and a note."""
    d = tmp_path / "runs"
    d.mkdir()
    files = {}
    for stamp, fixture, mtime in ((OLD, f"kineto_nw4_worker0.{OLD}", 3_000_000_000),
                                  (NEW, f"kineto_nw4_worker0.{NEW}", 1_000_000_000),
                                  (OLDEST, "kineto_nw0", 4_000_000_000)):
        f = d / f"host.{stamp}.pt.trace.json.gz"
        shutil.copy(real_trace(fixture), f)
        os.utime(f, (mtime, mtime))
        files[stamp] = f
    (d / "notes.json").write_text('{"hello": 1}')
    return d, files


def test_every_entry_point_picks_the_newest_stamp_not_the_newest_mtime(folder):
    d, files = folder
    newest_by_mtime = max(files.values(), key=lambda f: f.stat().st_mtime)
    assert newest_by_mtime == files[OLDEST]
    assert plan_folder(d).picks == [("", files[NEW])]
    assert resolve(d) == files[NEW]
    assert find_traces(d) == [files[NEW], files[OLD], files[OLDEST]]
    assert load(d).path == files[NEW]


def test_info_and_analyze_name_the_same_trace(folder):
    d, files = folder
    info = _cli("info", d, "--json")
    analyze = _cli("analyze", d, "--json")
    assert info.returncode == 0 and analyze.returncode == 0, info.stderr + analyze.stderr
    picked = json.loads(info.stdout)
    assert picked["trace"] == json.loads(analyze.stdout)["trace"] == str(files[NEW])
    assert picked["traces_in_folder"] == [str(files[s]) for s in (NEW, OLD, OLDEST)]


def test_no_trace_in_a_folder_is_a_typed_error(tmp_path):
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    with pytest.raises(NoTraceInFolder, match=r"folder holds no trace .*notes\.json"):
        resolve(tmp_path)
    assert find_traces(tmp_path) == []
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NoTraceInFolder, match="folder is empty"):
        load(empty)
    assert issubclass(NoTraceInFolder, TraceError)  # callers that catch TraceError still do


def test_info_and_analyze_say_alike_why_a_session_holds_no_trace(tmp_path):
    (tmp_path / "run.json").write_text('{"script": "/work/train.py"}')
    (tmp_path / "events.jsonl").write_text("")
    with pytest.raises(NoTraceInFolder, match="the run of train.py holds no trace and no "
                                              r"finished record \(still running, or killed\)"):
        resolve(tmp_path)
    info, analyze = _cli("info", tmp_path), _cli("analyze", tmp_path)
    assert info.returncode == analyze.returncode == 2
    assert info.stderr == analyze.stderr and info.stderr.count("\n") == 1
    assert f"{tmp_path}: folder holds no trace: the run of train.py" in info.stderr
