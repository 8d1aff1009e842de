"""Advice v2 on the real traces: what leads, what is carded, what is minor."""

from __future__ import annotations

import pytest

from stallscope.core.analysis import analyze
from stallscope.core.causes import CAUSES
from stallscope.core.trace import load

GPU_WITH_STEPS = ["kineto_nw0", "kineto_nw4_worker0.1623212756351",
                  "kineto_nw4_worker0.1623213129365", "hta_sampled_rank-0", "hta_sampled_rank-1",
                  "hta_df_index_resolver", "hta_nccl_parser", "hta_negative_queue", "hta_rank-0",
                  "hta_trace_diff_control", "hta_trace_diff_test", "hta_triton",
                  "tracelens_resnet", "hta_amd_trace"]
RULE_OF = {"data_loading": {"dataloader_bound"}, "sync": {"sync_stalls"},
           "optimizer": {"optimizer_bound"}, "cpu_ops": {"host_bound"},
           "backward": {"backward_bound"}, "python": {"python_overhead"},
           "gpu_wait": {"small_kernels", "stream_wait"}}


def _largest(stats):
    return max(CAUSES[:-1], key=lambda c: stats.idle_by_cause[c])


@pytest.mark.parametrize("prefix", GPU_WITH_STEPS)
def test_cards_follow_the_rules(real_trace, prefix):
    report = analyze(load(real_trace(prefix)))
    width = report.window_us
    lo, hi = report.window
    # a window that is not advisable shows its one card; the rules hold for the withheld ones
    cards = report.advice if report.advisable else report.withheld
    savings = [a.saving_us for a in cards if not a.minor]
    assert savings == sorted(savings, reverse=True)
    assert all(s >= 0.01 * width for s in savings)  # no card under 1% of W leads
    assert all(a.saving_us < 0.01 * width for a in cards if a.minor)
    if cards and cards[0].minor:
        assert all(a.minor for a in cards)
    for a in cards:
        assert a.focus is not None, a.id
        assert lo <= a.focus[0] < a.focus[1] <= hi, a.id
    for dev, stats in report.devices.items():
        if stats.idle_us >= 0.10 * width:
            ids = {a.id for a in cards if a.device == dev}
            assert ids & RULE_OF[_largest(stats)], (dev, _largest(stats), ids)
        low = stats.utilization < 0.5 and report.advisable  # else: the window's card only
        assert ("low_utilization" in [h.id for h in report.headlines]) == low or \
            len(report.devices) > 1
    assert "low_utilization" not in [a.id for a in report.advice]


@pytest.mark.parametrize("prefix", ["hta_sampled_rank-1", "hta_df_index_resolver"])
def test_the_top_card_is_the_largest_cause(real_trace, prefix):
    report = analyze(load(real_trace(prefix)))
    (stats,) = report.devices.values()
    top = report.advice[0]
    assert top.id in RULE_OF[_largest(stats)] and not top.minor
    assert top.saving_us == pytest.approx(stats.idle_by_cause[_largest(stats)])


def test_sampled_rank0_exposed_communication_outweighs_its_largest_cause(real_trace):
    """On rank 0 the all-reduces run bare 336 ms (27.3% of W), more than the largest idle
    cause, queued work (312 ms, 25.4%): sorted by saving_us, exposed_comm leads and the
    largest cause's card follows."""
    report = analyze(load(real_trace("hta_sampled_rank-0")))
    stats = report.devices[0]
    assert _largest(stats) == "gpu_wait"
    assert [a.id for a in report.advice[:2]] == ["exposed_comm", "stream_wait"]
    assert report.advice[0].saving_us == pytest.approx(stats.exposed_comm_us)
    assert report.advice[1].saving_us == pytest.approx(stats.idle_by_cause["gpu_wait"])
    assert stats.exposed_comm_us > stats.idle_by_cause["gpu_wait"]


def test_a_busy_trace_gets_no_host_bound(real_trace):
    """Issue 11: host_bound fired on a 96.3% busy trace whose idle is 2% of the window."""
    report = analyze(load(real_trace("hta_trace_diff_test")))
    assert report.devices[1].utilization > 0.96
    assert "host_bound" not in [a.id for a in report.advice]


def test_kineto_nw0_ceiling(real_trace):
    report = analyze(load(real_trace("kineto_nw0")))
    steps = sum(s.dur_us for s in report.steps)
    waits = sum(s.idle_by_cause[0]["data_loading"] for s in report.steps)
    top = report.ceilings[0]
    assert (top.device, top.cause) == (0, "data_loading")
    assert top.speedup == pytest.approx(steps / (steps - waits))
    assert top.text == f"up to {top.speedup:.2f}x faster if the GPU never waited for data"
    assert 1.4 < top.speedup < 1.6
