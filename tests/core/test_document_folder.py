"""Folder rules (issue 14): which traces a folder stands for, why, the other runs, and every
file picked or skipped with its reason. Folders are built in tmp from symlinks to (or copies of)
the real traces; the CLI is run as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixture_traces import fixture_path

from stallscope.core.document import plan, plan_path
from stallscope.core.errors import TraceError
from stallscope.core.folder import file_time, plan_folder

pytestmark = pytest.mark.runner  # the CLI in a child process

STAMP_OLD, STAMP_NEW = 1623143089861, 1623213129365  # Kineto's epoch-ms stamps (2021-06)


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stallscope.core.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def _link(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.symlink_to(src)
    return dst


def _set_mtime(p: Path, when: float) -> None:
    os.utime(p, (when, when))


def test_kineto_timestamp_in_the_name_beats_mtime(tmp_path):
    small = fixture_path("hta_triton_example")
    old = tmp_path / f"host_1.{STAMP_OLD}.pt.trace.json.gz"
    new = tmp_path / f"host_1.{STAMP_NEW}.pt.trace.json.gz"
    shutil.copy(small, old)
    shutil.copy(small, new)
    _set_mtime(new, time.time() - 86400)  # the newer stamp has the older mtime
    _set_mtime(old, time.time())
    p = plan_folder(tmp_path)
    assert p.picks == [("", new)]
    assert "Kineto's timestamp in the file name" in p.why()
    skipped = {s.path: s.reason for s in p.all_skipped}
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(STAMP_OLD / 1000))
    assert skipped == {old: f"older than {new.name} in the same folder (name time {when})"}


@pytest.mark.parametrize("name, want", [
    ("w.1623143089861.pt.trace.json", 1623143089.861),             # epoch ms
    ("w.1623143089.pt.trace.json", 1623143089.0),                  # epoch s
    ("train_rank3.20240501-101502-123.pt.trace.json.gz",
     time.mktime((2024, 5, 1, 10, 15, 2, 0, 0, -1)) + 0.123),     # the runner's stamp
])
def test_file_time_reads_the_name(name, want):
    t, source = file_time(Path(name), mtime=0.0)
    assert source == "name" and t == pytest.approx(want)


def test_month_day_stamp_takes_the_year_of_the_mtime():
    mtime = time.mktime((2024, 8, 1, 0, 0, 0, 0, 0, -1))
    t, source = file_time(Path("rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"), mtime)
    assert source == "name" and time.localtime(t)[:6] == (2024, 4, 3, 18, 51, 38)
    early = time.mktime((2024, 2, 1, 0, 0, 0, 0, 0, -1))  # April would be after the mtime
    t, _ = file_time(Path("rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"), early)
    assert time.localtime(t)[0] == 2023


def test_two_tensorboard_runs_are_listed_with_how_to_choose(tmp_path):
    small = fixture_path("hta_triton_example")
    a = _link(small, tmp_path / "runA" / f"host_1.{STAMP_OLD}.pt.trace.json.gz")
    b = _link(small, tmp_path / "runB" / f"host_1.{STAMP_NEW}.pt.trace.json.gz")
    p = plan_folder(tmp_path)
    assert [r.name for r in p.runs] == ["runB", "runA"] and p.picks == [("", b)]
    text = "\n".join(p.lines())
    assert "2 runs in this folder (choose one with --run N or --run FOLDER" in text
    assert "1. runB" in text and "2. runA" in text
    assert {s.path: s.reason for s in p.all_skipped} == {
        a: "in run 2 (runA), not the one picked; choose it with --run 2"}
    assert plan_folder(tmp_path, run="runA").picks == [("", a)]
    assert plan_folder(tmp_path, run="2").picks == [("", a)]
    with pytest.raises(TraceError, match=r"--run runC is no run in this folder \(runs: 1 = runB, "
                                         r"2 = runA\)"):
        plan_folder(tmp_path, run="runC")
    out = _cli("analyze", tmp_path, "--run", "runA", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["trace"] == str(a) and doc["folder"]["chosen_run"] == 2
    bad = _cli("analyze", tmp_path, "--run", "9")
    assert bad.returncode == 2 and "runs: 1 = runB, 2 = runA" in bad.stderr
    assert bad.stderr.count("\n") == 1


def test_mixed_folder_lists_every_file_as_analysed_or_skipped(tmp_path):
    kinds = {  # name in the folder -> fixture it links to (None: written here)
        f"w0.{STAMP_OLD}.pt.trace.json.gz": "kineto_nw0",
        f"w4.{STAMP_NEW}.pt.trace.json.gz": "hta_triton_example",
        "sub/hta.pt.trace.json.gz": "hta_amd_trace",
        "loose_a.json.gz": "hta_cpu_only",
        "loose_b.json.gz": "hta_sampled_rank-1",
    }
    for name, prefix in kinds.items():
        _link(fixture_path(prefix), tmp_path / name)
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "empty.json").write_bytes(b"")
    (tmp_path / "bad.json.gz").write_bytes(b"\x1f\x8b\x08\x00broken")
    (tmp_path / ".rank0.pt.trace.json.gz.part").write_bytes(b"half")
    os.mkfifo(tmp_path / "pipe.json")
    out = _cli("analyze", tmp_path, "--all", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    folder = doc["folder"]
    every = {str(p) for p in tmp_path.rglob("*") if not p.is_dir()}
    picked = {p["path"] for p in folder["picked"]}
    skipped = {s["path"]: s["reason"] for s in folder["skipped"]}
    assert picked | set(skipped) == every and not picked & set(skipped)
    assert len(picked) == 5 and {t["trace"] for t in doc["traces"]} == picked
    assert skipped[str(tmp_path / "config.json")] == "JSON without a traceEvents list: not a trace"
    assert skipped[str(tmp_path / "notes.txt")].startswith("not a trace file by name")
    assert skipped[str(tmp_path / "empty.json")] == "file is empty"
    assert skipped[str(tmp_path / "bad.json.gz")] == "not a valid gzip file"
    assert skipped[str(tmp_path / "pipe.json")] == "is a FIFO, not a trace file"
    assert skipped[str(tmp_path / ".rank0.pt.trace.json.gz.part")] == "hidden or temporary file"
    text = _cli("analyze", tmp_path, "--all")
    assert text.returncode == 0, text.stderr
    for name in ("config.json", "notes.txt", "empty.json", "bad.json.gz", "pipe.json"):
        assert name in text.stdout
    for name in kinds:
        assert Path(name).name in text.stdout


def test_ranks_of_unrelated_jobs_are_not_paired(tmp_path):
    r0 = _link(fixture_path("hta_rank-0"), tmp_path / fixture_path("hta_rank-0").name)
    r34 = _link(fixture_path("hta_cpu_only"), tmp_path / fixture_path("hta_cpu_only").name)
    p = plan_folder(tmp_path)
    assert len(p.runs) == 2 and all(r.kind == "job" and len(r.files) == 1 for r in p.runs)
    assert {r.world_size for r in p.runs} == {1, 300}
    assert len(p.picks) == 1 and p.picks[0][1] in (r0, r34)
    assert plan(tmp_path) == p.picks


def test_ranks_of_one_job_pair_and_older_copies_are_named(tmp_path):
    for r in (0, 1):
        _link(fixture_path(f"hta_sampled_rank-{r}"), tmp_path / f"hta_sampled_rank-{r}.json.gz")
    _link(fixture_path("hta_sampled_rank-0"), tmp_path / "old_copy_rank-0.json.gz")
    # one job signature and the same clock (the trace's first ts): rank 0 twice, equal times,
    # so the name decides which is taken for the newer
    p = plan_folder(tmp_path)
    assert p.picks == [("rank 0", tmp_path / "hta_sampled_rank-0.json.gz"),
                       ("rank 1", tmp_path / "hta_sampled_rank-1.json.gz")]
    assert [(s.path.name, s.reason) for s in p.all_skipped] == [
        ("old_copy_rank-0.json.gz", "rank 0 again in this job: older than "
                                    "hta_sampled_rank-0.json.gz")]
    assert p.runs[0].files[0].time_source == "trace"


def test_jobs_split_by_time(tmp_path):
    """The same job signature recorded 3 hours apart: two jobs, the newer picked."""
    src = [fixture_path(f"hta_sampled_rank-{r}") for r in (0, 1)]
    first = 1_700_000_000_000
    for job, at in (("a", first), ("b", first + 3 * 3600 * 1000)):
        for r in (0, 1):
            _link(src[r], tmp_path / f"{job}_rank{r}.{at + 1500 * r}.pt.trace.json.gz")
    p = plan_folder(tmp_path)
    assert [len(r.files) for r in p.runs] == [2, 2] and [r.name for r in p.runs] == [". #1",
                                                                                  ". #2"]
    assert [path.name.split("_")[0] for _, path in p.picks] == ["b", "b"]
    assert [lb for lb, _ in p.picks] == ["rank 0", "rank 1"]
    assert all(s.reason == "in run 2 (. #2), not the one picked; choose it with --run 2"
               for s in p.all_skipped) and len(p.all_skipped) == 2
    assert [path.name.split("_")[0] for _, path in plan_folder(tmp_path, run="2").picks] == \
        ["a", "a"]


def test_empty_and_traceless_folders_say_so(tmp_path):
    with pytest.raises(TraceError, match="folder is empty"):
        plan(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(TraceError, match=r"folder holds no trace .*notes\.txt \(not a trace "
                                         r"file by name"):
        plan_path(tmp_path)


def test_cli_folder_of_ranks_prints_the_table_and_straggler(tmp_path):
    for r in (0, 1):
        _link(fixture_path(f"hta_sampled_rank-{r}"), tmp_path / f"hta_sampled_rank-{r}.json.gz")
    (tmp_path / "README.txt").write_text("two ranks")
    out = _cli("analyze", tmp_path)
    assert out.returncode == 0, out.stderr
    assert "2 ranks of world size 128" in out.stdout and "Straggler: rank " in out.stdout
    assert "skipped 1 file (not a trace file by name" in out.stdout
    doc = json.loads(_cli("analyze", tmp_path, "--json", "--workers", "1").stdout)
    assert set(doc) == {"folder", "traces", "stragglers", "failed"}
    assert [t["label"] for t in doc["traces"]] == ["rank 0", "rank 1"]
    assert doc["stragglers"]["slowest"]["rank"] in ("rank 0", "rank 1")
    assert doc["folder"]["skipped"] == [{"path": str(tmp_path / "README.txt"),
                                         "reason": "not a trace file by name (*.json, *.json.gz)"}]


def test_a_session_folder_names_its_own_records(tmp_path):
    (tmp_path / "run.json").write_text('{"script": "train.py"}')
    (tmp_path / "events.jsonl").write_text("")
    (tmp_path / "stdout.log").write_text("")
    (tmp_path / "lineprof").mkdir()
    (tmp_path / "lineprof" / "getitem.json").write_text("{}")
    trace = _link(fixture_path("hta_triton_example"),
                  tmp_path / "traces" / "train.20240501-101502-123.pt.trace.json.gz")
    p = plan_folder(tmp_path)
    assert p.picks == [("", trace)] and p.runs[0].name == "traces"
    assert {s.path.name: s.reason for s in p.all_skipped} == {
        n: "the session's own record, not a trace"
        for n in ("run.json", "events.jsonl", "stdout.log", "getitem.json")}
    assert p.runs[0].files[0].time_source == "name"


def test_two_traces_of_one_boot_are_ordered_by_base_time_plus_first_ts(tmp_path):
    """baseTimeNanoseconds is when the clock started (the boot): the same in every trace recorded
    since. The trace recorded later is the one whose first event is later on that clock."""
    base = 1_767_189_312_000_000_000  # 2025-12-31, as in a real Kineto trace

    def trace(name: str, first_ts_us: float, mtime: float) -> Path:
        events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
                   "tid": 1, "ts": first_ts_us, "dur": 100},
                  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                   "ts": first_ts_us + 10, "dur": 20}]
        path = tmp_path / name
        path.write_text(json.dumps({"baseTimeNanoseconds": base, "traceEvents": events}))
        _set_mtime(path, mtime)
        return path

    later = trace("a.json", 701_805_216_966.892 + 3600e6, mtime=time.time() - 86400)
    earlier = trace("b.json", 701_805_216_966.892, mtime=time.time())  # newer mtime: a copy
    p = plan_folder(tmp_path)
    assert p.picks == [("", later)]
    picked = p.runs[p.chosen].files[0]
    assert picked.time_source == "trace"
    assert picked.time == pytest.approx(base / 1e9 + 701_805.216966892 + 3600)
    assert [s.path for s in p.all_skipped] == [earlier]
