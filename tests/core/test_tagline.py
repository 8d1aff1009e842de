"""The start screen's one-line tagline of a Report (core/render/tagline.py), on real Reports of
small synthetic traces and of real fixtures: its numbers are the report's, its wording follows
the device's kind and the window's."""

from __future__ import annotations

from fixture_traces import fixture_path
from synthetic_traces import MAIN_TID, Synth, cause_trace, cpu_only_trace, steps

from stallscope.core.analysis import analyze
from stallscope.core.causes import BY_CODE
from stallscope.core.render.tagline import tagline
from stallscope.core.trace import load


def _idle_pct(stats) -> int:
    return round(100 * stats.idle_us / (stats.busy_us + stats.idle_us))


def test_one_gpu_mostly_one_cause(tmp_path):
    report = analyze(load(cause_trace(tmp_path / "t.json", "data_loading", share=0.44)))
    stats = report.devices[0]
    assert stats.idle_by_cause["data_loading"] > 0.9 * stats.idle_us
    assert tagline(report) == f"GPU idle {_idle_pct(stats)}%, mostly data loading"
    assert 40 <= _idle_pct(stats) <= 48


def test_a_busy_gpu_has_nothing_to_chase(tmp_path):
    report = analyze(load(cause_trace(tmp_path / "t.json", "sync", share=0.02)))
    busy = 100 - _idle_pct(report.devices[0])
    assert busy >= 95
    assert tagline(report) == f"GPU busy {busy}%, no idle time worth chasing"


def _two_devices(path, idle_on_3: float):
    """Device 0 always busy, device 3 idle `idle_on_3` of each 10 ms step (nothing launching)."""
    b = Synth()
    for t0 in steps(b, 4, 10_000.0):
        for dev, busy in ((0, 10_000.0), (3, 10_000.0 * (1 - idle_on_3))):
            b.corr += 1
            b.x("cudaLaunchKernel", "cuda_runtime", t0 - 5, 2.0, tid=MAIN_TID,
                correlation=b.corr)
            b.x("gemm", "kernel", t0, busy, pid=dev, tid=7, device=dev, stream=7,
                correlation=b.corr)
    return b.save(path)


def test_several_gpus_speak_of_the_worst(tmp_path):
    report = analyze(load(_two_devices(tmp_path / "two.json", idle_on_3=0.7)))
    stats = report.devices[3]
    text = tagline(report)
    assert text.startswith(f"GPU 3 (worst of 2) idle {_idle_pct(stats)}%")
    assert _idle_pct(stats) == 70


def test_without_a_gpu_it_speaks_of_steps(tmp_path):
    starved = analyze(load(cpu_only_trace(tmp_path / "a.json", loader_us=4_000.0)))
    share = round(100 * sum(s.data_loading_us for s in starved.steps)
                  / sum(s.dur_us for s in starved.steps))
    assert share == 40
    assert tagline(starved) == "No GPU in trace; steps wait on data loading 40% of the time"
    fed = analyze(load(cpu_only_trace(tmp_path / "b.json", loader_us=10.0, n=3)))
    assert tagline(fed) == "No GPU in trace (CPU only), 3 steps over 30.00 ms"


def test_real_traces_name_the_device_and_the_window():
    report = analyze(load(fixture_path("kineto_nw0")))
    stats = report.devices[0]
    top = max(stats.idle_by_cause, key=stats.idle_by_cause.get)
    assert tagline(report) == f"GPU idle {_idle_pct(stats)}%, mostly {BY_CODE[top].phrase}"
    mtia = analyze(load(fixture_path("hta_mtia_inference_rank_0")))
    assert tagline(mtia).startswith("MTIA ") and "GPU" not in tagline(mtia)
    amd = analyze(load(fixture_path("hta_amd_trace")))
    assert tagline(amd).endswith("(start-up window)")
