"""Analysis on real traces, checked against a plain-Python reading of DESIGN.md."""

from __future__ import annotations

import bisect
import gzip
import json

import numpy as np
import pytest

from stallscope.core import intervals as iv
from stallscope.core.analysis import analyze
from stallscope.core.trace import load

CAUSES = ("data_loading", "sync", "optimizer", "cpu_ops", "uncovered")  # v1; v2 in Diagnosis v2

GPU = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
CPU_OPS = {"cpu_op", "Operator", "cuda_runtime", "Runtime", "cuda_driver"}
ANNOTATIONS = ("ProfilerStep#", "enumerate(DataLoader)#", "enumerate(DataPipe)#", "Optimizer.")
SYNC = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
        "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
        "hipMemcpyWithStream"}


def _merge(pairs):
    out = []
    for a, b in sorted(pairs):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _clip(pairs, lo, hi):
    return [(max(a, lo), min(b, hi)) for a, b in pairs if a < hi and b > lo]


def reference(path):
    """DESIGN.md's definitions, written the slow obvious way from the raw JSON."""
    with gzip.open(path) as f:
        doc = json.load(f)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e for e in events if e["name"].startswith("ProfilerStep#")
                    and e.get("cat") != "gpu_user_annotation"), key=lambda e: e["ts"])
    main = (str(steps[0]["pid"]), str(steps[0]["tid"]))
    lo, hi = steps[0]["ts"], steps[-1]["ts"] + steps[-1]["dur"]

    def on_main(pred):
        return _merge(_clip([(e["ts"], e["ts"] + e["dur"]) for e in events
                             if (str(e["pid"]), str(e["tid"])) == main and pred(e)], lo, hi))

    layers = [
        on_main(lambda e: e["name"].startswith(("enumerate(DataLoader)#", "enumerate(DataPipe)#"))),
        on_main(lambda e: e["name"] in SYNC),
        on_main(lambda e: e["name"].startswith("Optimizer.")),
        on_main(lambda e: e.get("cat") in CPU_OPS and not e["name"].startswith(ANNOTATIONS)),
    ]
    devices = {}
    for dev in sorted({e["args"]["device"] for e in events if e.get("cat") in GPU}):
        busy = _merge(_clip([(e["ts"], e["ts"] + e["dur"]) for e in events
                             if e.get("cat") in GPU and e["args"]["device"] == dev], lo, hi))
        edges = [lo] + [x for ab in busy for x in ab] + [hi]
        gaps = [(a, b) for a, b in zip(edges[::2], edges[1::2], strict=True) if b > a]
        by_cause = dict.fromkeys(CAUSES, 0.0)
        points = sorted({x for a, b in gaps for x in (a, b)}
                        | {x for layer in layers for a, b in layer for x in (a, b)})
        gap_starts = [a for a, _ in gaps]
        for a, b in zip(points, points[1:], strict=False):
            m = (a + b) / 2
            k = bisect.bisect_right(gap_starts, m) - 1
            if k < 0 or m >= gaps[k][1]:
                continue
            cause = "uncovered"
            for name, layer in zip(CAUSES, layers, strict=False):
                j = bisect.bisect_right([s for s, _ in layer], m) - 1
                if j >= 0 and m < layer[j][1]:
                    cause = name
                    break
            by_cause[cause] += b - a
        busy_us = sum(b - a for a, b in busy)
        devices[str(dev)] = {"busy_us": busy_us, "idle_us": (hi - lo) - busy_us,
                             "idle_gaps": len(gaps), "idle_by_cause": by_cause}
    return {"window": (lo, hi), "main": main, "devices": devices, "n_steps": len(steps)}


@pytest.mark.parametrize("prefix", ["kineto_nw0", "hta_sampled_rank-1", "tracelens_resnet",
                                    "hta_amd_trace", "hta_trace_diff_test"])
def test_analysis_matches_the_plain_reference(real_trace, prefix):
    path = real_trace(prefix)
    ref = reference(path)
    report = analyze(load(path))
    assert report.window == pytest.approx(ref["window"], abs=1e-3)
    assert report.main_thread == ref["main"]
    assert len(report.steps) == ref["n_steps"]
    assert set(report.devices) == set(ref["devices"])
    for dev, want in ref["devices"].items():
        got = report.devices[dev]
        assert got.busy_us == pytest.approx(want["busy_us"], rel=1e-9, abs=1e-3)
        assert got.idle_us == pytest.approx(want["idle_us"], rel=1e-9, abs=1e-3)
        assert got.idle_gaps == want["idle_gaps"]
        for cause in CAUSES:
            assert got.idle_by_cause[cause] == pytest.approx(
                want["idle_by_cause"][cause], rel=1e-6, abs=0.1), cause  # float64 ulp at 1e12 µs


def test_kineto_nw0_is_dataloader_bound(real_trace):
    report = analyze(load(real_trace("kineto_nw0")))
    dev = report.devices["0"]
    causes = dev.idle_by_cause
    assert max(causes, key=causes.get) == "data_loading"
    assert causes["data_loading"] / report.window_us > 0.30
    assert sum(causes.values()) == pytest.approx(dev.idle_us)
    assert 0.55 < dev.utilization < 0.57
    ids = [a.id for a in report.advice]
    assert "dataloader_bound" in ids and "pageable_h2d" in ids
    advice = report.advice[ids.index("dataloader_bound")]
    assert "33.9%" in advice.evidence and "355.6 ms" in advice.evidence
    # every step waits ~40% of its time for the single-process DataLoader
    assert len(report.steps) == 6
    assert all(0.35 < s.data_loading_us / s.dur_us < 0.45 for s in report.steps)
    lo, hi = report.worst_gap("data_loading")
    assert hi - lo > 1000 and report.window[0] <= lo < hi <= report.window[1]


@pytest.mark.parametrize("prefix", ["kineto_nw4_worker0.1623212756351",
                                    "kineto_nw4_worker0.1623213129365"])
def test_kineto_nw4_is_not_dataloader_bound(real_trace, prefix):
    report = analyze(load(real_trace(prefix)))
    assert "dataloader_bound" not in [a.id for a in report.advice]
    assert report.devices["0"].idle_by_cause["data_loading"] / report.window_us < 0.01


def test_df_index_resolver_memory_peaks_come_from_totals(real_trace):
    report = analyze(load(real_trace("hta_df_index_resolver")))
    mem = report.memory["1"]
    assert mem.has_totals
    assert len(mem.ts) == 26770
    assert mem.peak_allocated == 6629508096.0
    assert mem.peak_reserved == 12782141440.0
    assert mem.peak_allocated == float(np.nanmax(report.trace.mem.total_allocated))


def test_kineto_memory_without_totals_is_a_running_sum(real_trace):
    trace = load(real_trace("kineto_nw0"))
    mem = analyze(trace).memory["0"]
    assert not mem.has_totals
    cuda = (trace.mem.device_type == 1) & (trace.mem.device_id == 0)
    assert np.array_equal(mem.allocated, np.cumsum(trace.mem.nbytes[cuda]))
    assert np.isnan(mem.reserved).all() and mem.peak_reserved is None


def test_cpu_only_trace_reports_no_gpu(real_trace):
    report = analyze(load(real_trace("hta_cpu_only")))
    assert report.devices == {} and report.memory == {}
    assert len(report.steps) == 1 and report.steps[0].gpu_busy_us == {}
    assert report.to_json()["devices"] == {}


def test_two_ranks_have_their_own_device(real_trace):
    r0 = analyze(load(real_trace("hta_sampled_rank-0")))
    r1 = analyze(load(real_trace("hta_sampled_rank-1")))
    assert (r0.trace.rank, list(r0.devices)) == (0, ["0"])
    assert (r1.trace.rank, list(r1.devices)) == (1, ["1"])


def test_every_fixture_loads_and_analyses(fixtures_dir):
    for path in sorted(fixtures_dir.glob("*.json.gz")):
        report = analyze(load(path))
        doc = report.to_json()
        json.dumps(doc, allow_nan=False)
        for dev, stats in doc["devices"].items():
            total = sum(stats["idle_by_cause"].values())
            assert total == pytest.approx(stats["idle_us"], abs=1e-3), (path.name, dev)
            assert 0.0 <= stats["utilization"] <= 1.0
        for step in doc["steps"]:
            assert 0 <= step["data_loading_us"] <= step["dur_us"] + 1e-6


def test_device_filter(real_trace):
    path = real_trace("hta_sampled_rank-1")
    report = analyze(load(path), device="1")
    assert list(report.devices) == ["1"]
    from stallscope.core.errors import StallscopeError
    with pytest.raises(StallscopeError, match="no GPU activity on device 5"):
        analyze(load(path), device=5)


def test_gaps_count_matches_interval_arrays(real_trace):
    report = analyze(load(real_trace("hta_rank-0")))
    stats = report.devices["0"]
    assert len(stats.gaps) == stats.idle_gaps
    assert iv.length(stats.gaps) == pytest.approx(stats.idle_us, rel=1e-9)
    assert iv.length(stats.cause_spans) == pytest.approx(stats.idle_us, rel=1e-9)
