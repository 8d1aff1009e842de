"""Before/after deltas, per-rank rows, per-step breakdown, report export and document
planning, on real traces (no Qt)."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest
from fixture_traces import fixture_path

from stallscope.core.analysis import analyze
from stallscope.core.causes import CAUSES
from stallscope.core.compare import (
    IDLE_GROUP,
    Metric,
    compare_reports,
    covered_in,
    device_name,
    mismatch_warnings,
    primary_device,
    rank_rows,
    step_breakdown,
    step_ms,
    summary_values,
)
from stallscope.core.document import load_document_job, plan
from stallscope.core.errors import StallscopeError, TraceError
from stallscope.core.jobs import run_job
from stallscope.core.render.export import (
    comparison_to_markdown,
    report_to_markdown,
    save_report,
)
from stallscope.core.trace import load


@pytest.fixture(scope="module")
def nw0():
    return analyze(load(fixture_path("kineto_nw0")))


@pytest.fixture(scope="module")
def nw4():
    return analyze(load(fixture_path("kineto_nw4_worker0.1623212756351")))


def test_num_workers_4_beats_0_on_step_time_and_data_loading(nw0, nw4):
    metrics = {m.key: m for m in compare_reports(nw0, nw4)}
    step = metrics["step_ms"]
    assert step.before == pytest.approx(np.mean([s.dur_us for s in nw0.steps]) / 1000)
    assert step.after == pytest.approx(np.mean([s.dur_us for s in nw4.steps]) / 1000)
    assert step.delta == pytest.approx(step.after - step.before)
    assert step.verdict == "better" and step.rel < -0.15
    util = metrics["utilization"]
    assert util.before == pytest.approx(100 * nw0.devices[0].utilization)
    assert util.verdict == "better" and util.after > util.before
    dl = metrics["idle_data_loading_ms"]
    assert dl.before == pytest.approx(nw0.devices[0].idle_by_cause["data_loading"] / 6000)
    assert dl.verdict == "better" and dl.after < 0.1 * dl.before
    # Per-cause idle per step adds up to the idle per step.
    total = sum(metrics[f"idle_{c}_ms"].before for c in CAUSES)
    assert total == pytest.approx(metrics["idle_ms"].before)


def test_a_report_compared_with_itself_changes_nothing(nw0):
    metrics = compare_reports(nw0, nw0)
    assert len(metrics) >= 4 + len(CAUSES)  # steps, step time, utilization, idle + each cause
    assert [m.delta for m in metrics] == [0.0] * len(metrics)
    assert {m.verdict for m in metrics} <= {"same", "n/a"}
    assert {m.change_text() for m in metrics} == {"≈"}
    assert mismatch_warnings(nw0, nw0) == []


def test_cause_rows_carry_their_cause_not_a_label_to_parse(nw0, nw4):
    metrics = compare_reports(nw0, nw4)
    rows = [m for m in metrics if m.cause is not None]
    assert [m.cause for m in rows] == list(CAUSES)
    assert [m.key for m in rows] == [f"idle_{c}_ms" for c in CAUSES]
    group = next(m for m in metrics if m.key == IDLE_GROUP)
    assert group.cause is None and group.before == pytest.approx(sum(m.before for m in rows))


def test_changes_below_the_noise_are_hidden():
    # The "+0.0 ms (+3%)" case: 0.03 ms more is below the 0.1 ms noise floor.
    tiny = Metric("x", "x", "ms", 1.00, 1.03, True)
    assert tiny.noise and tiny.change_text() == "≈" and tiny.verdict == "same"
    # 1% of a large value is noise too, however many ms it is.
    assert Metric("x", "x", "ms", 500.0, 505.0, True).change_text() == "≈"
    real = Metric("x", "x", "ms", 100.0, 80.0, True)
    assert not real.noise and real.change_text() == "-20.00 ms (-20%)"
    assert Metric("x", "x", "ms", 80.0, 100.0, True).change_text() == "+20.00 ms (+25%)"
    assert Metric("u", "u", "%", 40.0, 60.0, False).change_text() == "+20.0 pts"
    assert Metric("u", "u", "%", 40.0, 40.3, False).change_text() == "≈"
    assert Metric("m", "m", "MiB", 1024.0, 2048.0, None).change_text() == \
        "+1,024.0 MiB (+100%)"
    assert Metric("x", "x", "ms", 3.0, None, True).change_text() == "-"
    assert real.value_text(real.before) == "100.00 ms"


def test_mismatch_warnings_name_each_difference(nw0):
    cpu = analyze(load(fixture_path("hta_cpu_only")))
    lines = mismatch_warnings(nw0, cpu)
    assert len(lines) == 2, lines  # GPU vs CPU-only, 6 vs N steps (no names or ranks to compare)
    assert lines[0].startswith("before ran on a GPU, after is CPU-only")
    assert len(cpu.steps) == 1
    assert lines[1] == "different step counts: 6 steps vs 1 step (per-step figures are means)"
    assert mismatch_warnings(cpu, nw0)[0].startswith("after ran on a GPU, before is CPU-only")
    v100 = analyze(load(fixture_path("hta_df_index_resolver")))       # rank 1, Tesla V100
    a100 = analyze(load(fixture_path("hta_trace_diff_control")))      # rank 3, NVIDIA A100
    assert device_name(v100, 1) == "Tesla V100-SXM2-32GB"
    lines = mismatch_warnings(a100, v100)
    assert "different GPUs: NVIDIA A100-PG509-200 (device 3) vs Tesla V100-SXM2-32GB (device 1)" \
        in lines
    assert "different ranks: rank 3 vs rank 1" in lines
    assert not any("CPU-only" in line for line in lines)


def test_ranks_without_device_names_warn_about_the_rank_only():
    r0, r1 = (analyze(load(fixture_path(f"hta_sampled_rank-{r}"))) for r in (0, 1))
    assert device_name(r0, 0) is None  # the sampled traces carry no deviceProperties
    lines = mismatch_warnings(r0, r1)
    assert lines[0] == "different ranks: rank 0 vs rank 1"
    assert all("GPUs" not in line for line in lines)


def test_verdicts_follow_direction_and_noise():
    assert Metric("x", "x", "ms", 100.0, 80.0, True).verdict == "better"
    assert Metric("x", "x", "ms", 100.0, 120.0, True).verdict == "worse"
    assert Metric("x", "x", "%", 40.0, 60.0, False).verdict == "better"
    assert Metric("x", "x", "ms", 100.0, 101.0, True).verdict == "same"      # 1%: noise
    assert Metric("x", "x", "ms", 0.01, 0.05, True).verdict == "same"        # 0.04 ms: noise
    assert Metric("x", "x", "", 3.0, None, True).verdict == "n/a"


def test_step_breakdown_partitions_each_step_into_every_cause(nw0):
    parts = step_breakdown(nw0)
    assert list(parts) == ["compute", *CAUSES]  # no lumped "other": each cause is its own part
    total = sum(parts.values())
    np.testing.assert_allclose(total, [s.dur_us for s in nw0.steps], rtol=1e-6)
    np.testing.assert_allclose(parts["compute"], [s.gpu_busy_us[0] for s in nw0.steps])
    # Over all steps, each cause adds up to the device's figure (the steps tile the window).
    for cause in CAUSES:
        assert parts[cause].sum() == pytest.approx(
            nw0.devices[0].idle_by_cause[cause], rel=1e-6, abs=1.0), cause
    assert parts["cpu_ops"].sum() > 0 and parts["optimizer"].sum() > 0
    assert (parts["data_loading"] > parts["optimizer"]).all()  # num_workers=0: data bound


def test_step_breakdown_without_per_step_causes_clips_the_painted_spans(nw4):
    """A report whose steps carry no idle_by_cause (an older analysis) gives the same bars, from
    the device's painted spans clipped to each step."""
    bare = dataclasses.replace(nw4, steps=[dataclasses.replace(s, idle_by_cause={})
                                           for s in nw4.steps])
    fresh, fallback = step_breakdown(nw4), step_breakdown(bare)
    assert fallback["cpu_ops"].sum() > 0
    for part in fresh:
        np.testing.assert_allclose(fallback[part], fresh[part], atol=1.0, err_msg=part)


def test_covered_in_matches_brute_force():
    rng = np.random.default_rng(7)
    starts = np.sort(rng.uniform(0, 1000, 300))
    spans = np.column_stack([starts, starts + rng.uniform(0, 0.5, 300)])
    spans[1:, 0] = np.maximum(spans[1:, 0], spans[:-1, 1])  # keep them disjoint
    spans[:, 1] = np.maximum(spans[:, 1], spans[:, 0])
    lo = rng.uniform(0, 900, 50)
    hi = lo + rng.uniform(0, 200, 50)
    brute = [np.clip(np.minimum(spans[:, 1], b) - np.maximum(spans[:, 0], a), 0, None).sum()
             for a, b in zip(lo, hi, strict=True)]
    np.testing.assert_allclose(covered_in(spans, lo, hi), brute, atol=1e-9)


def test_rank_rows_mark_the_slowest_rank():
    reports = [analyze(load(fixture_path(f"hta_sampled_rank-{r}"))) for r in (0, 1)]
    rows = rank_rows(reports, ["rank 0", "rank 1"])
    times = [step_ms(r) for r in reports]
    assert [r.step_ms for r in rows] == pytest.approx(times)
    assert [r.slowest for r in rows] == [t == max(times) for t in times]
    for row, report in zip(rows, reports, strict=True):
        dev = primary_device(report)
        assert row.utilization == pytest.approx(report.devices[dev].utilization)
        per_step = report.devices[dev].idle_by_cause["optimizer"] / (1000 * len(report.steps))
        assert row.idle_ms_by_cause["optimizer"] == pytest.approx(per_step)


def test_no_gpu_trace_has_no_device_metrics():
    report = analyze(load(fixture_path("hta_cpu_only")))
    values = summary_values(report)
    assert "utilization" not in values and values["steps"][2] == len(report.steps)
    parts = step_breakdown(report)
    np.testing.assert_allclose(sum(parts.values()), [s.dur_us for s in report.steps])
    assert not parts["compute"].any()
    # the main thread's step time by cause: the 210 ms step is Python between recorded ops
    # (its other threads ran gloo:all_reduce)
    np.testing.assert_allclose(parts["python"], [s.host_by_cause["python"] for s in report.steps])
    assert parts["python"][0] > 0.99 * report.steps[0].dur_us


def test_export_markdown_and_json_round_trip(nw0, tmp_path):
    md = save_report(nw0, tmp_path / "r.md").read_text()
    assert md.startswith("# stallscope report: kineto_nw0")
    assert f"{100 * nw0.devices[0].utilization:.1f}%" in md
    for advice in nw0.advice:
        assert f"### {advice.title}" in md and advice.fix in md
    assert md.count("| ProfilerStep#") == len(nw0.steps)
    data = json.loads(save_report(nw0, tmp_path / "r.json").read_text())
    assert data["window_us"] == list(nw0.window)
    assert data["devices"]["0"]["idle_by_cause"] == pytest.approx(
        nw0.devices[0].idle_by_cause)
    with pytest.raises(StallscopeError, match="r.txt"):
        save_report(nw0, tmp_path / "r.txt")
    with pytest.raises(StallscopeError, match="cannot write"):
        save_report(nw0, tmp_path / "no" / "such" / "dir" / "r.md")
    assert "No GPU activity" in report_to_markdown(analyze(load(fixture_path("hta_cpu_only"))))


def test_comparison_markdown_lists_every_metric(nw0, nw4):
    metrics = compare_reports(nw0, nw4)
    text = comparison_to_markdown(metrics, "nw0", "nw4")
    assert text.count("\n| ") == len(metrics) + 1
    step = next(m for m in metrics if m.key == "step_ms")
    row = next(line for line in text.splitlines() if line.startswith("| step time (mean) |"))
    assert f"{step.before:,.2f} ms" in row and f"{step.after:,.2f} ms" in row
    assert row.endswith("| better |")


def test_plan_finds_ranks_in_a_folder(tmp_path):
    for r in (1, 0):
        shutil.copy(fixture_path(f"hta_sampled_rank-{r}"), tmp_path)
    files = plan(tmp_path)
    assert [label for label, _ in files] == ["rank 0", "rank 1"]
    assert files[0][1].name == "hta_sampled_rank-0.json.gz"
    single = fixture_path("kineto_nw0")
    assert plan(single) == [("", single)]
    with pytest.raises(TraceError, match="no such file"):
        plan(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceError, match="empty"):
        plan(empty)


def test_load_document_job_reports_progress_and_ranks(tmp_path):
    for r in (0, 1):
        shutil.copy(fixture_path(f"hta_sampled_rank-{r}"), tmp_path)
    seen = []
    doc = run_job(load_document_job(tmp_path), lambda d, t: seen.append((d, t)))
    assert doc.multi_rank and doc.labels == ["rank 0", "rank 1"]
    assert [r.trace.rank for r in doc.reports] == [0, 1]
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == 1000 and {t for _, t in seen} == {1000}
