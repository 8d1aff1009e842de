"""`stallscope-cli compare`: the compare view's numbers, headless, on real traces."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from fixture_traces import fixture_path

from stallscope.core.cli import main
from stallscope.core.compare import compare_reports, mismatch_warnings
from stallscope.core.document import load_document_job
from stallscope.core.jobs import run_job


def cli_json(capsys, *args) -> dict:
    assert main(["compare", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def raw_step_ms(path) -> float:
    """Mean ProfilerStep#N duration, read straight from the JSON (no stallscope code)."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    durs = [e["dur"] for e in events if e.get("ph") == "X" and e.get("cat") != "gpu_user_annotation"
            and str(e.get("name", "")).startswith("ProfilerStep#")
            and e["name"][len("ProfilerStep#"):].isdigit()]
    return float(np.mean(durs)) / 1000.0


def test_compare_agrees_with_the_compare_view_on_nw0_vs_nw4(capsys):
    nw0, nw4 = fixture_path("kineto_nw0"), fixture_path("kineto_nw4_worker0.1623212756351")
    out = cli_json(capsys, nw0, nw4)
    # the view's own computation: the documents the app loads, core.compare's functions
    before = run_job(load_document_job(nw0)).reports[0]
    after = run_job(load_document_job(nw4)).reports[0]
    view = {m.key: m for m in compare_reports(before, after)}
    assert [m["key"] for m in out["metrics"]] == list(view)
    for m in out["metrics"]:
        assert (m["before"], m["after"], m["verdict"]) == (
            view[m["key"]].before, view[m["key"]].after, view[m["key"]].verdict), m["key"]
    assert out["warnings"] == mismatch_warnings(before, after)
    metrics = {m["key"]: m for m in out["metrics"]}
    # independent of stallscope: the step means from the raw files
    assert metrics["step_ms"]["before"] == pytest.approx(raw_step_ms(nw0), rel=1e-6)
    assert metrics["step_ms"]["after"] == pytest.approx(raw_step_ms(nw4), rel=1e-6)
    assert metrics["step_ms"]["verdict"] == "better"
    # four workers take the DataLoader out of the GPU's idle time
    assert metrics["idle_data_loading_ms"]["after"] < 0.1 * metrics["idle_data_loading_ms"][
        "before"]

    assert main(["compare", str(nw0), str(nw4)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0] == f"before: {nw0}" and text[1] == f"after:  {nw4}"
    step_row = next(line for line in text if line.startswith("step time (mean)"))
    assert step_row.split()[-1] == "better"
    assert view["step_ms"].change_text() in step_row


def test_compare_warns_on_a_gpu_trace_against_a_cpu_only_one(capsys):
    out = cli_json(capsys, fixture_path("kineto_nw0"), fixture_path("hta_cpu_only"))
    assert any("CPU-only" in w for w in out["warnings"])


def test_compare_needs_two_inputs_or_a_tune_folder(tmp_path, capsys):
    assert main(["compare", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (f"stallscope: error: {tmp_path}: give two traces or sessions, or one tune "
                   "folder (it has no tune.json)\n")
