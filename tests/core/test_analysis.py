"""Analysis on real traces, checked against a plain-Python reading of docs/definitions.md.

`reference()` reads the raw JSON event by event and follows the definitions word for word: no
numpy, no shared code with core/analysis. Each idle piece between two consecutive boundaries
is tested against every rule in priority order.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re

import numpy as np
import pytest
from fixture_traces import analyzed

from stallscope.core import intervals as iv
from stallscope.core.analysis import analyze
from stallscope.core.trace import load

CAUSES = ("gpu_wait", "data_loading", "sync", "optimizer", "cpu_ops", "backward", "python",
          "uncovered")
GPU = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
RUNTIME = {"cuda_runtime", "cuda_driver", "Runtime"}
ANNOTATIONS = ("ProfilerStep#", "enumerate(DataLoader)#", "enumerate(DataPipe)#", "Optimizer.")
SYNC = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
        "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
        "hipMemcpyWithStream"}
BACKWARD = {"stallscope#backward", "## backward ##"}
CLOSURE_ENDINGS = ("training_step", ".backward", "closure")
COMM_WORDS = ("nccl", "rccl", "nvshmem", "::internode::", "::intranode::", "cross_device_reduce",
              "allreduce", "all_reduce", "allgather", "all_gather", "reducescatter",
              "reduce_scatter", "alltoall", "all_to_all")
STEP = re.compile(r"ProfilerStep#\d+")

# Every real trace with GPU activity and steps.
GPU_FIXTURES = ["kineto_nw0", "kineto_nw4_worker0.1623212756351",
                "kineto_nw4_worker0.1623213129365", "hta_sampled_rank-0", "hta_sampled_rank-1",
                "hta_df_index_resolver",
                "hta_nccl_parser", "hta_negative_queue", "hta_rank-0", "hta_trace_diff_control",
                "hta_trace_diff_test", "hta_triton", "tracelens_resnet", "hta_amd_trace"]


class Merged(list):
    """Sorted disjoint [a, b) pairs; `x in merged` asks whether one of them holds x."""

    def __init__(self, pairs):
        super().__init__(pairs)
        self.starts = [a for a, _ in pairs]

    def __contains__(self, x):
        k = bisect.bisect_right(self.starts, x) - 1
        return k >= 0 and x < self[k][1]


def _merge(pairs):
    out = []
    for a, b in sorted(pairs):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return Merged(out)


def _minus(merged, holes):
    """The parts of `merged` outside `holes` (both sorted and disjoint)."""
    out = []
    for a, b in merged:
        for c, d in holes:
            if d <= a or c >= b:
                continue
            if c > a:
                out.append((a, c))
            a = max(a, d)
            if a >= b:
                break
        if a < b:
            out.append((a, b))
    return Merged([list(p) for p in out])


def _is_closure(e):
    return e["name"] == "stallscope#closure" or (
        e.get("cat") == "user_annotation" and e["name"].endswith(CLOSURE_ENDINGS))


def _is_comm(e):
    low = e["name"].lower()
    return any(w in low for w in COMM_WORDS)


def _clip(pairs, lo, hi):
    return [(max(a, lo), min(b, hi)) for a, b in pairs if a < hi and b > lo]


def _is_cpu_op(e):
    """cpu_ops' "operator or runtime/driver call" (2021: Operator except annotations)."""
    cat = e.get("cat")
    if cat == "Operator":
        return not e["name"].startswith(ANNOTATIONS)
    return cat in {"cpu_op", "cuda_runtime", "cuda_driver", "Runtime"}


def _is_annotation(e):
    cat = e.get("cat")
    return (cat == "user_annotation" or (cat == "Operator" and e["name"].startswith(ANNOTATIONS))
            ) and not STEP.fullmatch(e["name"])


def reference(path):
    """docs/definitions.md, written the slow obvious way from the raw JSON."""
    with gzip.open(path) as f:
        doc = json.load(f)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    thread = {id(e): (str(e["pid"]), str(e["tid"])) for e in events}

    def span(e):
        return (e["ts"], e["ts"] + e["dur"])

    steps = sorted((e for e in events if STEP.fullmatch(e["name"])
                    and e.get("cat") not in GPU | {"gpu_user_annotation"}), key=lambda e: e["ts"])
    main = thread[id(steps[0])]
    lo, hi = steps[0]["ts"], max(s["ts"] + s["dur"] for s in steps)
    on_main = [e for e in events if thread[id(e)] == main]

    def union(evs):
        return _merge(_clip([span(e) for e in evs], lo, hi))

    def device_of(e):
        args = e.get("args", {})
        return args["device"] if "device" in args else int(e["pid"])

    launch = {}
    for e in sorted((e for e in events if e.get("cat") in RUNTIME), key=lambda e: e["ts"]):
        c = e.get("args", {}).get("correlation")
        if c is not None and c not in launch:  # several with one id: the earliest
            launch[c] = e
    ops = [e for e in events if e.get("cat") in GPU and e["dur"] > 0]
    main_layers = {
        "data_loading": union(e for e in on_main
                              if e["name"].startswith(("enumerate(DataLoader)#",
                                                       "enumerate(DataPipe)#"))),
        "optimizer": _minus(union(e for e in on_main if e["name"].startswith("Optimizer.")),
                            union(e for e in on_main if _is_closure(e))),
        "cpu_ops": union(e for e in on_main if _is_cpu_op(e)),
        "python": union(e for e in steps if thread[id(e)] == main),
    }
    annotations = sorted((e for e in on_main if _is_annotation(e) and e["dur"] > 0),
                         key=lambda e: e["ts"])
    devices = {}
    for dev in sorted({device_of(e) for e in ops}):
        mine = sorted((e for e in ops if device_of(e) == dev), key=lambda e: e["ts"])
        ids = {e.get("args", {}).get("correlation") for e in mine} - {None}
        launchers = {thread[id(e)] for e in events if e.get("cat") in RUNTIME
                     and e.get("args", {}).get("correlation") in ids}
        helpers = launchers - {main}
        layers = {
            "data_loading": main_layers["data_loading"],
            "sync": union(e for e in events if e["name"] in SYNC
                          and (thread[id(e)] == main or thread[id(e)] in launchers)),
            "optimizer": main_layers["optimizer"],
            "cpu_ops": main_layers["cpu_ops"],
            "backward": union([e for e in events if thread[id(e)] in helpers and _is_cpu_op(e)]
                              + [e for e in on_main if e["name"] in BACKWARD]),
            "python": main_layers["python"],
        }
        busy = union(mine)
        edges = [lo] + [x for ab in busy for x in ab] + [hi]
        gaps = Merged([(a, b) for a, b in zip(edges[::2], edges[1::2], strict=True) if b > a])
        op_starts = [e["ts"] for e in mine]

        def _launched_at(op):
            found = launch.get(op.get("args", {}).get("correlation"))
            return found["ts"] if found else float("inf")

        def queued(gap, mine=mine, op_starts=op_starts):
            a, b = gap
            k = bisect.bisect_left(op_starts, b)
            if k == len(mine):
                return False
            first = mine[k:bisect.bisect_right(op_starts, mine[k]["ts"])]

            nxt = min(first, key=_launched_at)
            found = launch.get(nxt.get("args", {}).get("correlation"))
            return found is not None and found["ts"] + found["dur"] <= a

        waiting = Merged([g for g in gaps if queued(g)])
        comm = union(e for e in mine if _is_comm(e))
        other = union(e for e in mine if not _is_comm(e))
        pieces = []  # (a, b, cause, annotation)
        points = sorted({x for a, b in gaps for x in (a, b)}
                        | {x for layer in layers.values() for a, b in layer for x in (a, b)}
                        | {x for e in annotations for x in span(e)})
        for a, b in zip(points, points[1:], strict=False):
            if a not in gaps:
                continue
            cause = "uncovered"
            if a in waiting:
                cause = "gpu_wait"
            else:
                for name, layer in layers.items():
                    if a in layer:
                        cause = name
                        break
            note = None
            if cause == "python":
                covering = [e for e in annotations if e["ts"] <= a < e["ts"] + e["dur"]]
                inner = max(covering, key=lambda e: (e["ts"], -e["dur"]), default=None)
                note = inner["name"] if inner else ""
            pieces.append((a, b, cause, note))
        by_cause = dict.fromkeys(CAUSES, 0.0)
        by_note = {}
        for a, b, cause, note in pieces:
            by_cause[cause] += b - a
            if note is not None:
                by_note[note] = by_note.get(note, 0.0) + b - a
        cuts = sorted({x for ab in comm + other for x in ab})
        exposed = sum(b - a for a, b in zip(cuts, cuts[1:], strict=False)
                      if a in comm and a not in other)
        per_step = [{c: sum(max(0.0, min(b, s["ts"] + s["dur"]) - max(a, s["ts"]))
                            for a, b, cause, _ in pieces if cause == c) for c in CAUSES}
                    for s in steps]
        busy_us = sum(b - a for a, b in busy)
        devices[dev] = {
            "busy_us": busy_us, "idle_us": (hi - lo) - busy_us, "idle_gaps": len(gaps),
            "idle_by_cause": by_cause, "python_by_annotation": by_note,
            "launchers": launchers, "comm_us": sum(b - a for a, b in comm),
            "exposed_comm_us": exposed, "steps": per_step}
    return {"window": (lo, hi), "main": main, "devices": devices,
            "steps": [(s["ts"], s["dur"]) for s in steps]}


@pytest.mark.parametrize("prefix", GPU_FIXTURES)
def test_analysis_matches_the_plain_reference(real_trace, prefix):
    matches_reference(real_trace(prefix), prefix, analyzed(prefix))


def with_closures_and_deepep(src, dst):
    """A real trace given the v3 shapes it lacks: a `stallscope#closure` over the middle half of
    every Optimizer.step, a Lightning-named `training_step` annotation inside the first, and
    every fifth kernel renamed as a DeepEP dispatch kernel."""
    with gzip.open(src) as f:
        doc = json.load(f)
    added, kernels = [], 0
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        if e["name"].startswith("Optimizer.step#"):
            a, d = e["ts"], e["dur"]
            added.append({**e, "name": "stallscope#closure", "cat": "user_annotation",
                          "ts": a + d / 4, "dur": d / 2, "args": {}})
            if len(added) == 1:
                added.append({**e, "name": "[LightningModule]Net.training_step",
                              "cat": "user_annotation", "ts": a + d / 8, "dur": d / 16,
                              "args": {}})
        elif e.get("cat") in ("kernel", "Kernel"):
            kernels += 1
            if kernels % 5 == 0:
                e["name"] = "void dpsk::ep::internode::dispatch<8, 16>(int*, float*)"
    doc["traceEvents"] += added
    with gzip.open(dst, "wt") as f:
        json.dump(doc, f)
    return dst


@pytest.mark.parametrize("prefix", ["hta_rank-0", "kineto_nw0"])
def test_closures_and_the_v3_vocabulary_match_the_plain_reference(real_trace, prefix, tmp_path):
    src = real_trace(prefix)
    path = with_closures_and_deepep(src, tmp_path / "v3.json.gz")
    matches_reference(path, prefix)
    before, after = analyzed(prefix), analyze(load(path))
    for dev, stats in after.devices.items():
        assert stats.comm_us > before.devices[dev].comm_us
        assert stats.idle_by_cause["optimizer"] <= before.devices[dev].idle_by_cause["optimizer"]
    # The closures cover half of every Optimizer.step (zero_grad keeps its time).
    opt = [sum(s.optimizer_us for s in r.steps) for r in (before, after)]
    assert 0 < opt[1] < 0.9 * opt[0]


def matches_reference(path, prefix, report=None):
    """`report`: the fixture's shared one (fixture_traces.analyzed), else analysed here."""
    ref = reference(path)
    report = report or analyze(load(path))
    lo, hi = ref["window"]
    width = hi - lo
    assert report.window == pytest.approx(ref["window"], abs=1e-3)
    assert report.main_thread == ref["main"]
    assert [(s.start_us, s.dur_us) for s in report.steps] == ref["steps"]
    assert set(report.devices) == set(ref["devices"])
    tol = 1e-6 * width  # float64 sums of ~1e4 pieces at ~1e15 µs; DESIGN allows 1% of W
    for dev, want in ref["devices"].items():
        got = report.devices[dev]
        assert got.busy_us == pytest.approx(want["busy_us"], abs=tol)
        assert got.idle_us == pytest.approx(want["idle_us"], abs=tol)
        assert got.idle_gaps == want["idle_gaps"]
        assert got.comm_us == pytest.approx(want["comm_us"], abs=tol)
        assert got.exposed_comm_us == pytest.approx(want["exposed_comm_us"], abs=tol)
        # On every GPU trace with steps the eight causes name at least 95% of idle.
        assert got.idle_by_cause["uncovered"] <= 0.05 * got.idle_us, prefix
        assert {report.trace.tracks[t] for t in got.launch_tracks} == want["launchers"]
        for cause in CAUSES:
            assert got.idle_by_cause[cause] == pytest.approx(
                want["idle_by_cause"][cause], abs=tol), cause
        assert set(got.python_by_annotation) == set(want["python_by_annotation"])
        for name, us in want["python_by_annotation"].items():
            assert got.python_by_annotation[name] == pytest.approx(us, abs=tol), name
        for step, want_step in zip(report.steps, want["steps"], strict=True):
            for cause in CAUSES:
                assert step.idle_by_cause[dev][cause] == pytest.approx(
                    want_step[cause], abs=1e-6 * step.dur_us + 1e-3), (step.name, cause)


def test_amd_launches_survive_the_loader(real_trace):
    """hta_amd writes `stream: "0x0"` on its runtime events; their correlation must still load,
    or no launch is found and L(d) is empty."""
    path = real_trace("hta_amd_trace")
    ref = reference(path)["devices"][2]
    report = analyze(load(path))
    got = report.devices[2]
    assert {report.trace.tracks[t] for t in got.launch_tracks} == ref["launchers"]
    for cause in CAUSES:
        assert got.idle_by_cause[cause] == pytest.approx(ref["idle_by_cause"][cause], abs=1e-3)


def test_kineto_nw0_is_dataloader_bound():
    report = analyzed("kineto_nw0")
    dev = report.devices[0]
    causes = dev.idle_by_cause
    assert max(causes, key=causes.get) == "data_loading"
    assert causes["data_loading"] / report.window_us > 0.30
    assert sum(causes.values()) == pytest.approx(dev.idle_us)
    assert 0.55 < dev.utilization < 0.57
    top = report.advice[0]
    assert top.id == "dataloader_bound" and not top.minor
    assert top.saving_us == pytest.approx(causes["data_loading"])
    assert "33.6%" in top.evidence and "352.40 ms" in top.evidence, top.evidence
    assert "pageable_h2d" in [a.id for a in report.advice]
    # every step waits ~40% of its time for the single-process DataLoader
    assert len(report.steps) == 6
    assert all(0.35 < s.data_loading_us / s.dur_us < 0.45 for s in report.steps)
    lo, hi = report.worst_gap("data_loading")
    assert hi - lo > 1000 and report.window[0] <= lo < hi <= report.window[1]
    assert top.focus == (lo, hi)


@pytest.mark.parametrize("prefix", ["kineto_nw4_worker0.1623212756351",
                                    "kineto_nw4_worker0.1623213129365"])
def test_kineto_nw4_is_not_dataloader_bound(prefix):
    report = analyzed(prefix)
    assert "dataloader_bound" not in [a.id for a in report.advice]
    assert report.devices[0].idle_by_cause["data_loading"] / report.window_us < 0.01


def test_df_index_resolver_memory_peaks_come_from_totals():
    report = analyzed("hta_df_index_resolver")
    mem = report.memory[1]
    assert mem.has_totals
    assert len(mem.ts) == 26770
    assert mem.peak_allocated == 6629508096.0
    assert mem.peak_reserved == 12782141440.0
    assert mem.peak_allocated == float(np.nanmax(report.trace.mem.total_allocated))


def test_kineto_memory_without_totals_is_a_running_sum(real_trace):
    trace = load(real_trace("kineto_nw0"))
    mem = analyze(trace).memory[0]
    assert not mem.has_totals
    cuda = (trace.mem.device_type == 1) & (trace.mem.device_id == 0)
    assert np.array_equal(mem.allocated, np.cumsum(trace.mem.nbytes[cuda]))
    assert np.isnan(mem.reserved).all() and mem.peak_reserved is None


def test_cpu_only_trace_reports_no_gpu():
    report = analyzed("hta_cpu_only")
    assert report.devices == {} and report.memory == {}
    assert len(report.steps) == 1 and report.steps[0].gpu_busy_us == {}
    assert report.to_json()["devices"] == {}
    # the main thread's step time, split by the host causes, adds up to the step
    assert sum(report.host_by_cause.values()) == pytest.approx(report.steps[0].dur_us)
    assert report.host_by_cause["gpu_wait"] == 0.0


def test_two_ranks_have_their_own_device():
    r0, r1 = analyzed("hta_sampled_rank-0"), analyzed("hta_sampled_rank-1")
    assert (r0.trace.rank, list(r0.devices)) == (0, [0])
    assert (r1.trace.rank, list(r1.devices)) == (1, [1])


def test_every_fixture_loads_and_analyses(fixtures_dir):
    for path in sorted(fixtures_dir.glob("*.json.gz")):
        report = analyze(load(path))
        doc = report.to_json()
        json.dumps(doc, allow_nan=False)
        for dev, stats in doc["devices"].items():
            total = sum(stats["idle_by_cause"].values())
            assert total == pytest.approx(stats["idle_us"], abs=1e-3), (path.name, dev)
            assert 0.0 <= stats["utilization"] <= 1.0
            assert 0.0 <= stats["comm_overlap"] <= 1.0
            assert sum(stats["python_by_annotation"].values()) == pytest.approx(
                stats["idle_by_cause"]["python"], abs=1e-3)
        for step in doc["steps"]:
            assert 0 <= step["data_loading_us"] <= step["dur_us"] + 1e-6
            for dev, by in step["idle_by_cause"].items():
                idle = step["dur_us"] - step["gpu_busy_us"][dev]
                # abs: a step's end is ts + dur in float64, 0.25 µs apart at 1.7e15 µs
                assert sum(by.values()) == pytest.approx(idle, abs=0.5), (path.name, dev)


def test_device_filter(real_trace):
    path = real_trace("hta_sampled_rank-1")
    report = analyze(load(path), device=1)
    assert list(report.devices) == [1]
    from stallscope.core.errors import StallscopeError
    with pytest.raises(StallscopeError, match="no GPU activity on device 5"):
        analyze(load(path), device=5)


def test_gaps_count_matches_interval_arrays():
    report = analyzed("hta_rank-0")
    stats = report.devices[0]
    assert len(stats.gaps) == stats.idle_gaps
    assert iv.length(stats.gaps) == pytest.approx(stats.idle_us, rel=1e-9)
    assert iv.length(stats.cause_spans) == pytest.approx(stats.idle_us, rel=1e-9)
    # every cause's worst gap is one of its spans, inside the window
    for cause, us in stats.idle_by_cause.items():
        gap = report.worst_gap(cause, 0)
        assert (gap is None) == (us == 0), cause
        if gap is not None:
            assert report.window[0] <= gap[0] < gap[1] <= report.window[1]
