"""Advice v2: every rule fires on a small synthetic trace just above its threshold and stays
quiet just below it; cards carry their numbers, saving_us and a focus; ordering, minor cards,
forced cards and headlines follow docs/definitions.md's "Advice"."""

from __future__ import annotations

import json

import pytest
from synthetic_traces import (
    Synth,
    comm_trace,
    cpu_only_trace,
    gpu_wait_trace,
    pageable_trace,
    steps,
)
from synthetic_traces import cause_trace as _cause_trace

from stallscope.core.advice import RULES, advise, rule
from stallscope.core.analysis import analyze
from stallscope.core.trace import load

ELEVEN = {"dataloader_bound", "sync_stalls", "optimizer_bound", "host_bound", "backward_bound",
          "python_overhead", "small_kernels", "stream_wait", "pageable_h2d", "allocator_churn",
          "exposed_comm"}
# issue 22: collectives on other threads, the line heatmap's hottest line
THIRTEEN = ELEVEN | {"collective_wait", "dataset_line"}

CAUSE_RULES = [("data_loading", "dataloader_bound"), ("sync", "sync_stalls"),
               ("optimizer", "optimizer_bound"), ("cpu_ops", "host_bound"),
               ("backward", "backward_bound"), ("python", "python_overhead")]


def _report(path):
    return analyze(load(path))


def _ids(report):
    return [a.id for a in report.advice]


def test_the_registry_holds_the_thirteen_rules():
    assert set(RULES) == THIRTEEN


@pytest.mark.parametrize(("cause", "rule_id"), CAUSE_RULES)
def test_cause_rule_fires_at_five_percent_of_the_window(tmp_path, cause, rule_id):
    above = _report(_cause_trace(tmp_path / "above.json", cause, 0.052))
    stats = above.devices[0]
    share = stats.idle_by_cause[cause] / above.window_us
    assert 0.0515 < share <= 0.052 + 1e-12, share  # the 2 µs launch counts for some
    card = next(a for a in above.advice if a.id == rule_id)
    assert card.cause == cause and card.device == 0 and not card.minor
    assert card.saving_us == pytest.approx(stats.idle_by_cause[cause])
    assert f"{100 * share:.1f}% of the 400.00 ms window" in card.evidence, card.evidence
    assert card.focus == above.worst_gap(cause, 0)
    assert above.advice[0].id == rule_id  # the only cause worth a card

    below = _report(_cause_trace(tmp_path / "below.json", cause, 0.048))
    share = below.devices[0].idle_by_cause[cause] / below.window_us
    assert 0.047 < share < 0.05
    assert rule_id not in _ids(below)
    assert below.advice == []


def test_backward_is_the_autograd_thread(tmp_path):
    report = _report(_cause_trace(tmp_path / "bw.json", "backward", 0.2))
    stats = report.devices[0]
    assert [report.trace.tracks[t] for t in stats.launch_tracks] == [("1", "2")]
    # the autograd thread's launch is one of its runtime calls: backward too
    assert stats.idle_by_cause["backward"] == pytest.approx(10 * 0.2 * 40_000)
    assert "autograd engine" in report.advice[0].evidence


def test_python_overhead_names_the_annotation(tmp_path):
    report = _report(_cause_trace(tmp_path / "py.json", "python", 0.1))
    stats = report.devices[0]
    assert stats.python_by_annotation == {"## forward ##": pytest.approx(10 * (4000 - 2.0))}
    card = report.advice[0]
    assert card.id == "python_overhead"
    assert "'## forward ##' 39.98 ms (100.0%)" in card.evidence, card.evidence


@pytest.mark.parametrize(("gap_us", "rule_id", "other"), [(10.0, "small_kernels", "stream_wait"),
                                                          (208.0, "stream_wait", "small_kernels")])
def test_gpu_wait_splits_on_twenty_microsecond_gaps(tmp_path, gap_us, rule_id, other):
    above = _report(gpu_wait_trace(tmp_path / "above.json", 0.052, gap_us))
    stats = above.devices[0]
    assert stats.idle_by_cause["gpu_wait"] == pytest.approx(stats.idle_us)
    assert stats.idle_by_cause["gpu_wait"] / above.window_us == pytest.approx(0.052, abs=5e-4)
    ids = _ids(above)
    assert ids == [rule_id], ids
    card = above.advice[0]
    assert card.saving_us == pytest.approx(stats.idle_by_cause["gpu_wait"])
    lo, hi = card.focus
    assert above.window[0] <= lo < hi <= above.window[1]
    below = _report(gpu_wait_trace(tmp_path / "below.json", 0.048, gap_us))
    assert below.devices[0].idle_by_cause["gpu_wait"] / below.window_us < 0.05
    assert rule_id not in _ids(below) and other not in _ids(below)


def test_exposed_comm_fires_at_five_percent(tmp_path):
    above = _report(comm_trace(tmp_path / "above.json", 0.052))
    stats = above.devices[0]
    assert stats.idle_us == 0.0
    assert stats.comm_us == pytest.approx(10 * (2080 + 1000))
    assert stats.exposed_comm_us == pytest.approx(10 * 2080)
    assert stats.comm_overlap == pytest.approx(1000 / 3080)
    assert above.steps[0].exposed_comm_us[0] == pytest.approx(2080)
    (card,) = above.advice
    assert card.id == "exposed_comm" and card.saving_us == pytest.approx(20_800)
    assert "20.80 ms (5.2% of the 400.00 ms window)" in card.evidence, card.evidence
    assert "overlap 32.5%" in card.evidence
    below = _report(comm_trace(tmp_path / "below.json", 0.048))
    assert below.advice == []


def test_pageable_h2d_fires_at_half_a_percent_and_is_minor(tmp_path):
    above = _report(pageable_trace(tmp_path / "above.json", 0.0052))
    (card,) = above.advice
    assert card.id == "pageable_h2d" and card.minor  # 0.52% < 1% of the window
    assert card.saving_us == pytest.approx(10 * 208)
    assert above.top_advice is None
    assert "10 host-to-device copies" in card.evidence
    assert _report(pageable_trace(tmp_path / "below.json", 0.0048)).advice == []


def _churn(path, malloc_in_step: bool, drop_in_window: bool):
    b = Synth()
    starts = list(steps(b, 4, 10_000.0))
    for t0 in starts:
        b.gpu(t0, 10_000.0, t0 - 2)
    b.x("cudaMalloc", "cuda_runtime", starts[2] + 100 if malloc_in_step else starts[0] - 500,
        300.0)
    b.memory(starts[0] + 10, 1 << 20, 1 << 20, 2 << 20)
    b.memory(starts[1] + 10, 1 << 20, 2 << 20, 4 << 20)
    end = starts[-1] + 10_000
    b.memory(starts[2] + 10 if drop_in_window else end + 100, -(1 << 20), 1 << 20, 2 << 20)
    return b.save(path)


def test_allocator_churn(tmp_path):
    calls = _report(_churn(tmp_path / "a.json", malloc_in_step=True, drop_in_window=False))
    (card,) = calls.advice
    assert card.id == "allocator_churn" and card.saving_us == pytest.approx(300.0)
    assert "1 cudaMalloc/cudaFree call ran inside steps, 300.0 µs" in card.evidence
    assert card.focus == (1_020_100.0, 1_020_400.0)
    drops = _report(_churn(tmp_path / "b.json", malloc_in_step=False, drop_in_window=True))
    (card,) = drops.advice
    assert card.id == "allocator_churn" and "shrank 1 time in the window" in card.evidence
    quiet = _report(_churn(tmp_path / "c.json", malloc_in_step=False, drop_in_window=False))
    assert quiet.advice == [] and quiet.memory[0].reserved_drops == 1  # after the window


def test_largest_cause_of_a_gpu_idle_ten_percent_is_always_carded(tmp_path):
    b = Synth()
    for t0 in steps(b, 10, 10_000.0):  # optimizer 4.5%, Python 3%, CPU ops 3% of each step
        b.x("Optimizer.step#AdamW.step", "user_annotation", t0, 450.0)
        b.x("aten::copy_", "cpu_op", t0 + 750, 298.0)
        b.gpu(t0 + 1050, 8950.0, t0 + 1048)
    report = _report(b.save(tmp_path / "t.json"))
    stats = report.devices[0]
    assert stats.idle_us / report.window_us == pytest.approx(0.105)
    assert _ids(report) == ["optimizer_bound"]  # 4.5% < 5%, but the largest of 10.5% idle
    assert report.advice[0].saving_us == pytest.approx(4500.0)


def test_cards_are_sorted_by_saving_and_minor_ones_come_last(tmp_path):
    b = Synth()
    for t0 in steps(b, 10, 10_000.0):
        b.x("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "user_annotation",
            t0, 1500.0)
        b.x("Optimizer.step#SGD.step", "user_annotation", t0 + 1500, 798.0)
        b.gpu(t0 + 2300, 7700.0, t0 + 2298)
        b.gpu(t0 + 2400, 60.0, t0 + 2302, name="Memcpy HtoD (Pageable -> Device)",
              cat="gpu_memcpy", stream=8)
    report = _report(b.save(tmp_path / "t.json"))
    assert _ids(report) == ["dataloader_bound", "optimizer_bound", "pageable_h2d"]
    savings = [a.saving_us for a in report.advice]
    assert savings[:2] == sorted(savings[:2], reverse=True)
    assert [a.minor for a in report.advice] == [False, False, True]
    assert report.top_advice.id == "dataloader_bound"
    doc = json.loads(json.dumps(report.to_json()))
    assert [a["saving_us"] for a in doc["advice"]] == pytest.approx(savings)


@pytest.mark.parametrize(("busy", "fires"), [(0.49, True), (0.51, False)])
def test_low_utilization_is_a_headline_not_a_card(tmp_path, busy, fires):
    report = _report(_cause_trace(tmp_path / "u.json", "data_loading", 1 - busy))
    assert report.devices[0].utilization == pytest.approx(busy)
    assert "low_utilization" not in _ids(report)
    assert [h.id for h in report.headlines] == (["low_utilization"] if fires else [])
    if fires:
        h = report.to_json()["headlines"][0]
        assert set(h) >= {"id", "title", "evidence"}
        assert "49.0%" in h["title"] and "data loading" in h["evidence"]


def test_dataloader_bound_without_a_gpu_speaks_of_step_time(tmp_path):
    report = _report(cpu_only_trace(tmp_path / "cpu.json", loader_us=1100.0))
    assert report.devices == {}
    # the rest of each step is aten::addmm: a compute-bound CPU step gets its own card (#33)
    assert [a.id for a in report.advice] == ["host_bound", "dataloader_bound"]
    card = report.advice[1]
    assert card.id == "dataloader_bound" and card.title == "Steps wait for data"
    assert "11.0% of step time (11.00 ms of 100.00 ms over 10 steps)" in card.evidence
    assert "1.10 ms per step" in card.evidence
    assert "GPU" not in card.title + card.evidence + card.fix
    assert card.focus == (1_000_000.0, 1_001_100.0)


def test_dataloader_bound_needs_a_millisecond_per_step(tmp_path):
    """Issue 14: 10.7% of step time for 0.17 ms/step of in-memory indexing is no loader
    problem. 0.9 ms of a 10 ms step is 9%, above the share, below the 1 ms floor."""
    short = _report(cpu_only_trace(tmp_path / "short.json", loader_us=900.0))
    assert short.host_by_cause["data_loading"] / short.host_base_us == pytest.approx(0.09)
    assert [a.id for a in short.advice] == ["host_bound"]  # addmm: 91% of each step (#33)
    thin = _report(cpu_only_trace(tmp_path / "thin.json", loader_us=1900.0, step_us=40_000.0))
    assert thin.host_by_cause["data_loading"] / thin.host_base_us == pytest.approx(0.0475)
    assert [a.id for a in thin.advice] == ["host_bound"]


def test_python_overhead_without_a_gpu(tmp_path):
    report = _report(cpu_only_trace(tmp_path / "cpu.json", loader_us=100.0, python_us=800.0))
    assert [a.id for a in report.advice] == ["host_bound", "python_overhead"]  # addmm 91%
    card = report.advice[1]
    assert card.id == "python_overhead"
    assert "'## log metrics ##' 8.00 ms" in card.evidence
    assert "GPU" not in card.title + card.evidence


def test_line_stats_are_passed_in_not_read_from_disk(tmp_path):
    from stallscope.core.lineprof import Line, Profile

    report = _report(_cause_trace(tmp_path / "dl.json", "data_loading", 0.3))
    before = report.advice[0].evidence
    prof = Profile(function="__getitem__", qualname="Jpegs.__getitem__", file="ds.py",
                   first_line=10, lines=[Line(11, 5, 0.8, "img = Image.open(p)"),
                                         Line(12, 5, 0.2, "return img")])
    (card, *_) = advise(report, [prof])
    assert card.evidence.startswith(before)
    assert "heaviest line is Jpegs.__getitem__ line 11 (`img = Image.open(p)`), 80%" \
        in card.evidence


def test_a_new_rule_is_one_decorated_function(tmp_path):
    from stallscope.core.report import Advice

    @rule("test_only_rule")
    def _always(ctx):
        return Advice("test_only_rule", "t", "e", "f", saving_us=ctx.base_us)

    try:
        report = _report(_cause_trace(tmp_path / "t.json", "optimizer", 0.1))
        assert report.advice[0].id == "test_only_rule"
    finally:
        del RULES["test_only_rule"]
    with pytest.raises(ValueError, match="registered twice"):
        rule("host_bound")(lambda ctx: None)
