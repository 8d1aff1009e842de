"""`stallscope-cli analyze / info` as a user runs them: real processes, real traces."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from stallscope.core.causes import CAUSES

pytestmark = pytest.mark.runner  # the CLI in a child process

CLI = [sys.executable, "-m", "stallscope.core.cli"]


def _cli(*args):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=120)


def test_analyze_json_follows_design_names(real_trace):
    out = _cli("analyze", real_trace("kineto_nw0"), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert {"window_us", "steps", "devices", "memory", "advice"} <= set(doc)
    lo, hi = doc["window_us"]
    assert hi - lo == 1623142624345228 + 164261 - 1623142623460172  # last step end - first start
    step = doc["steps"][0]
    assert set(step) == {"name", "start_us", "dur_us", "data_loading_us", "optimizer_us",
                         "gpu_busy_us", "idle_by_cause", "comm_us", "exposed_comm_us",
                         "comm_overlap", "host_by_cause"}
    assert set(step["idle_by_cause"]["0"]) == set(CAUSES)
    assert step["name"] == "ProfilerStep#5" and step["dur_us"] == 176078.0
    assert list(step["gpu_busy_us"]) == ["0"]
    dev = doc["devices"]["0"]
    assert set(dev) == {"busy_us", "idle_us", "utilization", "idle_gaps", "idle_by_cause",
                        "python_by_annotation", "comm_us", "exposed_comm_us", "comm_overlap",
                        "launching_threads"}
    assert set(dev["idle_by_cause"]) == set(CAUSES)
    assert doc["advice"][0]["id"] == "dataloader_bound"
    assert set(doc["advice"][0]) == {"id", "title", "evidence", "fix", "saving_us", "minor",
                                     "culprits"}
    assert doc["window_kind"] == "steady"
    assert {"headlines", "ceilings"} <= set(doc)
    # a ceiling's base is the step time it is taken of (one name: Ceiling.base_us)
    steps_us = sum(s["dur_us"] for s in doc["steps"])
    assert {c["base_us"] for c in doc["ceilings"] if c["device"] == "0"} == {steps_us}
    assert all("step_us" not in c for c in doc["ceilings"])
    assert doc["memory"]["0"]["peak_allocated"] == 2791636480.0


def test_analyze_text_says_only_recorded_memory_facts(real_trace):
    """kineto_nw0 records allocations without the allocator's totals and no cudaMalloc: the
    memory line has the peak allocated only (no 'peak reserved -', no '0x')."""
    out = _cli("analyze", real_trace("kineto_nw0"))
    line = next(x for x in out.stdout.splitlines() if x.startswith("memory "))
    assert line == "memory GPU 0: peak allocated 2,662.3 MiB"
    assert "0x" not in out.stdout and " -," not in out.stdout


def test_analyze_text_report(real_trace):
    out = _cli("analyze", real_trace("kineto_nw0"))
    assert out.returncode == 0
    assert "GPU 0: utilization  56.0%" in out.stdout
    assert "data loading" in out.stdout and "[dataloader_bound]" in out.stdout
    assert "ProfilerStep#10" in out.stdout


def test_analyze_device_option(real_trace):
    ok = _cli("analyze", real_trace("hta_df_index_resolver"), "--json", "--device", "1")
    assert ok.returncode == 0 and list(json.loads(ok.stdout)["devices"]) == ["1"]
    bad = _cli("analyze", real_trace("hta_df_index_resolver"), "--device", "3")
    assert bad.returncode == 2
    assert "no GPU activity on device 3 (devices with activity: 1)" in bad.stderr


def test_analyze_cpu_only(real_trace):
    out = _cli("analyze", real_trace("hta_cpu_only"))
    assert out.returncode == 0
    assert "No GPU activity in this trace" in out.stdout


def test_info(real_trace):
    out = _cli("info", real_trace("hta_sampled_rank-1"), "--json")
    info = json.loads(out.stdout)
    assert info["gpu_devices"] == [1] and info["rank"] == 1 and info["world_size"] == 128
    assert info["steps"] == ["ProfilerStep#551", "ProfilerStep#552"]
    assert info["by_category"]["kernel"] == 1104
    text = _cli("info", real_trace("hta_sampled_rank-1")).stdout
    assert "rank       1 of 128" in text


@pytest.mark.parametrize("content, message", [
    (None, "no such file or folder"),
    (b"", "file is empty"),
    (b"garbage", "not JSON"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, content, message):
    path = tmp_path / "t.json"
    if content is not None:
        path.write_bytes(content)
    out = _cli("analyze", path)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and message in out.stderr and str(path) in out.stderr
    assert "Traceback" not in out.stderr


def test_folder_with_ranks_all(tmp_path, real_trace):
    import shutil
    for r in (0, 1):
        shutil.copy(real_trace(f"hta_sampled_rank-{r}"), tmp_path / f"r{r}.pt.trace.json.gz")
    out = _cli("analyze", tmp_path, "--json", "--all")
    assert sorted(t["rank"] for t in json.loads(out.stdout)["traces"]) == [0, 1]


def test_folder_of_ranks_analyses_each_rank(tmp_path, real_trace):
    import shutil
    for r in (0, 1):  # names as the ranks wrote them: no *.pt.trace.json here
        shutil.copy(real_trace(f"hta_sampled_rank-{r}"), tmp_path)
    out = _cli("analyze", tmp_path, "--json")
    assert out.returncode == 0, out.stderr
    traces = json.loads(out.stdout)["traces"]
    assert [t["rank"] for t in traces] == [0, 1]
    assert [list(t["devices"]) for t in traces] == [["0"], ["1"]]


def test_session_without_a_trace_says_so(tmp_path):
    (tmp_path / "run.json").write_text("{}")
    (tmp_path / "events.jsonl").write_text("")
    out = _cli("analyze", tmp_path)
    assert out.returncode == 2
    assert "folder holds no trace" in out.stderr and str(tmp_path) in out.stderr


def test_info_help_describes_the_command():
    out = _cli("info", "--help")
    assert out.returncode == 0
    assert "Show what a trace holds" in out.stdout


def test_a_command_imports_only_its_own_module(tmp_path, real_trace):
    code = ("import sys; from stallscope.core import cli; rc = cli.main(sys.argv[1:]); "
            "print('MODULES', *sorted(m for m in sys.modules if m.startswith('stallscope')))")
    out = subprocess.run([sys.executable, "-c", code, "analyze", "--json",
                          str(real_trace("hta_sampled_rank-0"))],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.strip().splitlines()[-1].split()[1:])
    assert "stallscope.core.commands.analyze" in loaded
    others = {f"stallscope.core.commands.{c}" for c in ("info", "run", "lineprof", "convert")}
    assert not loaded & others
    assert not {m for m in loaded if m.startswith(("stallscope.core.lmdb", "stallscope.gui"))}
    # without a command (help, a typo) every command is there to list
    top = _cli("--help")
    assert all(c in top.stdout for c in ("analyze", "info", "run", "lineprof", "convert"))
    typo = _cli("analyse", "x")
    assert typo.returncode == 2 and "invalid choice: 'analyse'" in typo.stderr


def test_help_and_version_import_no_command():
    """--help and --version list every command from core/commands.SUMMARIES without importing
    a command module, numpy or msgspec (start-up: issue 34)."""
    code = ("import sys; from stallscope.core import cli\n"
            "try:\n    cli.main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('MODULES', *sorted(m for m in sys.modules if m.startswith(("
            "'stallscope.core.commands.', 'numpy', 'msgspec'))))")
    for flag in ("--help", "--version"):
        out = subprocess.run([sys.executable, "-c", code, flag], capture_output=True, text=True,
                             timeout=120)
        loaded = out.stdout.strip().splitlines()[-1].split()[1:]
        assert loaded == ["stallscope.core.commands.terminal"], (flag, loaded)


def test_listed_summaries_are_each_commands_own_help():
    import argparse

    from stallscope.core import cli
    from stallscope.core.commands import SUMMARIES

    assert set(SUMMARIES) == set(cli.COMMANDS)
    for name in cli.COMMANDS:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"stallscope.core.commands.{name}").register(sub)
        assert [a.help for a in sub._choices_actions] == [SUMMARIES[name]], name
