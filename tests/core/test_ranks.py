"""Per-rank tasks, the local pool, stragglers: checked against a plain-Python reading of the
definitions (core/ranks/stragglers.py) on two real ranks of one job, and on a generated job
whose slow rank and its cause are known."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import statistics

import psutil
import pytest
from fixture_traces import fixture_path
from synth import make_job

from stallscope.core.errors import Cancelled, StallscopeError
from stallscope.core.jobs import CancelFlag, run_job
from stallscope.core.ranks.job import analyze_ranks_job
from stallscope.core.ranks.pool import default_workers, json_bytes, run_local, run_serial
from stallscope.core.ranks.stragglers import stragglers
from stallscope.core.ranks.tasks import RankFailure, RankSummary, analyze_rank

GPU = ("kernel", "gpu_memcpy", "gpu_memset")


# ----------------------------------------------------------------------------- plain Python

def _plain_rank(path):
    """Per step (name -> list of (name, start, end, arrival)) and compute, read the slow way."""
    events = json.loads(gzip.open(path).read())["traceEvents"]
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU and e["dur"] > 0]
    devices = {e["args"]["device"] for e in gpu}
    assert len(devices) == 1
    comm = sorted((e for e in gpu if e["name"].lower().startswith(("nccl", "rccl"))),
                  key=lambda e: e["ts"])
    other = [e for e in gpu if not e["name"].lower().startswith(("nccl", "rccl"))]
    steps = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                    and e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    out = {}
    for s in steps:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        colls = []
        for c in comm:
            if lo <= c["ts"] < hi:
                before = [o["ts"] + o["dur"] for o in other if o["ts"] < c["ts"]]
                arrival = min(c["ts"], max(before)) if before else c["ts"]
                colls.append((c["name"], c["ts"], c["ts"] + c["dur"], arrival))
        # compute: the union of non-comm GPU ops, clipped to the step
        spans = sorted((max(o["ts"], lo), min(o["ts"] + o["dur"], hi)) for o in other
                       if o["ts"] < hi and o["ts"] + o["dur"] > lo)
        compute, end = 0.0, -float("inf")
        for a, b in spans:
            if b > end:
                compute += b - max(a, end)
                end = b
        out[s["name"]] = (colls, compute)
    return out


def _plain_stragglers(ranks):
    """{key: [waited, held_up, last_count]} and the per-collective last ranks."""
    keys = list(ranks)
    figs = {k: [0.0, 0.0, 0] for k in keys}
    lasts = []
    common = [n for n in ranks[keys[0]] if all(n in ranks[k] for k in keys)]
    for name in common:
        n = min(len(ranks[k][name][0]) for k in keys)
        for i in range(n):
            arr = [ranks[k][name][0][i][3] for k in keys]
            last = arr.index(max(arr))
            waits = [arr[last] - a for a in arr]
            others = [w for j, w in enumerate(waits) if j != last]
            for k, w in zip(keys, waits, strict=True):
                figs[k][0] += w
            if max(others) > 0:
                figs[keys[last]][1] += sum(others) / len(others)
                figs[keys[last]][2] += 1
                lasts.append(keys[last])
            else:
                lasts.append(None)
    return figs, lasts


# ----------------------------------------------------------------------------- real ranks

@pytest.fixture(scope="module")
def sampled():
    paths = [fixture_path(f"hta_sampled_rank-{r}") for r in (0, 1)]
    return paths, [analyze_rank(str(p), f"rank {r}") for r, p in enumerate(paths)]


def test_rank_summaries_match_a_plain_reading(sampled):
    paths, summaries = sampled
    for path, s in zip(paths, summaries, strict=True):
        assert isinstance(s, RankSummary), s
        plain = _plain_rank(path)
        assert [st.name for st in s.steps] == list(plain)
        for st in s.steps:
            colls, compute = plain[st.name]
            assert len(st.collectives) == len(colls) == 5
            for got, (name, start, end, arrival) in zip(st.collectives, colls, strict=True):
                assert (got.name, got.start_us, got.end_us) == (name, start, end)
                assert got.compute_end_us == pytest.approx(arrival, abs=1e-6)
            assert st.compute_us == pytest.approx(compute, abs=1e-3)
        assert s.rank == int(s.label[-1]) and s.world_size == 128
        assert s.device == s.rank  # rank 0 runs on GPU 0, rank 1 on GPU 1
        assert s.to_json()["comm_device"] == str(s.rank)  # JSON keys devices by string
        dev = s.to_json()["devices"][str(s.device)]
        assert dev["comm_us"] > 0 and 0 <= dev["exposed_comm_us"] <= dev["comm_us"]
        assert len(pickle.dumps(s)) < 64_000  # small: what a worker sends back


def test_stragglers_match_a_plain_reading(sampled):
    paths, summaries = sampled
    table = stragglers(summaries)
    plain = {f"rank {r}": _plain_rank(p) for r, p in enumerate(paths)}
    figs, lasts = _plain_stragglers(plain)
    assert table.steps == ["ProfilerStep#551", "ProfilerStep#552"]
    assert [c.last for c in table.collectives] == lasts and len(lasts) == 10
    for key, (waited, held, count) in figs.items():
        got = table.ranks[key]
        assert got.waited_us == pytest.approx(waited, abs=1e-6)
        assert got.held_up_us == pytest.approx(held, abs=1e-6)
        assert got.last_count == count
    # two ranks: the mean wait of "the others" is the other rank's wait
    assert sum(r.held_up_us for r in table.ranks.values()) == pytest.approx(
        sum(r.waited_us for r in table.ranks.values()), abs=1e-6)
    slowest = max(figs, key=lambda k: figs[k][1])
    assert table.slowest.key == slowest and table.order()[0] == slowest
    # its cause: the largest excess over the other rank (compute or an idle cause)
    me, other = (summaries[0], summaries[1]) if slowest == "rank 0" else summaries[::-1]
    excess = {"compute": sum(a.compute_us - b.compute_us for a, b in zip(me.steps, other.steps,
                                                                          strict=True))}
    for c in me.steps[0].idle_by_cause:
        excess[c] = sum(a.idle_by_cause[c] - b.idle_by_cause[c]
                        for a, b in zip(me.steps, other.steps, strict=True))
    best = max(excess, key=excess.get)
    assert table.slowest.cause == best
    assert table.slowest.cause_extra_us == pytest.approx(excess[best])
    assert slowest in table.slowest.text and "per step" in table.slowest.text


def test_a_broken_rank_is_a_failure_not_an_exception(tmp_path):
    bad = tmp_path / "rank3.json.gz"
    bad.write_bytes(b"\x1f\x8b not gzip")
    got = analyze_rank(str(bad), "rank 3")
    assert isinstance(got, RankFailure) and str(bad) in got.message and "gzip" in got.message


# ----------------------------------------------------------------------------- generated job

@pytest.fixture(scope="module")
def job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("job")
    return make_job(folder, 6, fixture_path("hta_sampled_rank-0"), repeat=2, slow_rank=4,
                    slow_us=15_000.0, jitter_us=300.0, seed=3)


def _tasks(job):
    return [(f"rank {r}", str(p)) for r, p in enumerate(job.paths)]


def test_generated_ranks_carry_rank_and_world_size(job):
    for r, p in enumerate(job.paths):
        head = gzip.open(p).read(4096)
        assert f'"rank":{r},"world_size":6'.encode() in head
    s = analyze_rank(str(job.paths[0]), "rank 0")
    assert [st.name for st in s.steps] == [f"ProfilerStep#{n}" for n in (551, 552, 553, 554)]


@pytest.mark.runner  # a process pool (forkserver or spawn)
def test_pool_names_the_injected_slow_rank_and_its_cause(job):
    seen = []
    result = run_job(analyze_ranks_job(_tasks(job), workers=2,
                                       on_result=lambda i, r: seen.append(i)))
    assert sorted(seen) == list(range(6))
    slow = result.stragglers.slowest
    assert slow.key == "rank 4" and slow.cause == "data_loading"
    assert result.stragglers.order()[0] == "rank 4"
    # each step: 15 ms more data loading than the median rank, give or take the 0.3 ms jitter
    assert slow.cause_extra_us / slow.steps == pytest.approx(15_000, abs=300)
    assert slow.held_up_us / slow.steps == pytest.approx(15_000, abs=300)
    assert slow.last_count == 4  # the first collective of each of the 4 steps
    assert "rank 4" in slow.text and "data loading" in slow.text


@pytest.mark.runner  # a process pool (forkserver or spawn)
def test_pool_and_serial_give_the_same_json(job):
    tasks = _tasks(job)[:4]
    serial = run_job(run_serial(tasks))
    pooled = run_job(run_local(tasks, workers=2))
    assert [r.to_json() for r in pooled] == [r.to_json() for r in serial]
    assert [r.steps for r in pooled] == [r.steps for r in serial]


def _pool_workers() -> list[psutil.Process]:
    """Live worker processes: the children of the fork server (or, with spawn, of this one)."""
    me = psutil.Process()
    out = []
    for p in me.children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
            if "resource_tracker" in cmd or p.status() == psutil.STATUS_ZOMBIE:
                continue
            if "forkserver" in cmd and p.ppid() == me.pid:
                continue  # the fork server itself
            out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.mark.runner  # a process pool (forkserver or spawn)
def test_cancel_stops_the_pool_and_its_processes(job):
    cancel = CancelFlag()
    during = []

    def first_result(i, r):
        during.append(len(_pool_workers()))
        cancel.set()

    gen = run_local(_tasks(job), workers=2, cancel=cancel, on_result=first_result)
    with pytest.raises(Cancelled):
        run_job(gen)
    assert during and during[0] == 2  # two workers ran ...
    assert _pool_workers() == []     # ... and none is left


@pytest.mark.runner  # a process pool (forkserver or spawn)
def test_a_broken_rank_is_listed_and_the_rest_analysed(job, tmp_path):
    bad = tmp_path / "rank6.json.gz"
    bad.write_bytes(b"{\"traceEvents\": [")
    tasks = _tasks(job)[:2] + [("rank 6", str(bad))]
    result = run_job(analyze_ranks_job(tasks, workers=2))
    assert [s.key for s in result.summaries] == ["rank 0", "rank 1"]
    assert [f.label for f in result.failures] == ["rank 6"]
    assert result.to_json()["failed"][0]["reason"].startswith(str(bad))
    with pytest.raises(StallscopeError, match="rank6.json.gz"):
        run_job(analyze_ranks_job([("rank 6", str(bad))]))


def test_workers_follow_cores_and_memory(job, monkeypatch):
    size = json_bytes(job.paths[0])
    raw = gzip.open(job.paths[0]).read()
    assert size == len(raw)
    paths = job.paths
    monkeypatch.setenv("STALLSCOPE_MEMORY_LIMIT", str(10 << 30))
    assert default_workers(paths) == min(len(os.sched_getaffinity(0)), len(paths))
    monkeypatch.setenv("STALLSCOPE_MEMORY_LIMIT", str(100 << 20))  # less than one worker needs
    assert default_workers(paths) == 1


# ----------------------------------------------------------------------------- Dask

@pytest.mark.runner  # a Dask LocalCluster of worker processes
def test_local_cluster_gives_the_same_json(job):
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed "
                                      "(pip install 'stallscope[cluster]')")
    tasks = _tasks(job)
    local = run_job(analyze_ranks_job(tasks, workers=2)).to_json()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        remote = run_job(analyze_ranks_job(tasks, scheduler=cluster.scheduler_address))
    assert json.dumps(remote.to_json(), sort_keys=True) == json.dumps(local, sort_keys=True)
    assert remote.stragglers.slowest.key == "rank 4"


def test_median_is_what_the_cause_compares_with(job):
    """Three or more ranks: the excess is over the median of the others, not their mean."""
    summaries = [analyze_rank(p, lb) for lb, p in _tasks(job)]
    table = stragglers(summaries)
    me = summaries[4]
    others = [s for k, s in enumerate(summaries) if k != 4]
    want = sum(st.idle_by_cause["data_loading"]
               - statistics.median(o.steps[j].idle_by_cause["data_loading"] for o in others)
               for j, st in enumerate(me.steps))
    assert table.slowest.excess_us["data_loading"] == pytest.approx(want)


@pytest.mark.runner  # a process pool (forkserver or spawn)
def test_a_killed_worker_costs_a_retry_not_a_rank(job):
    import signal

    killed = []

    def kill_one(i, r):
        if not killed:
            victims = _pool_workers()
            assert victims
            os.kill(victims[0].pid, signal.SIGKILL)
            killed.append(victims[0].pid)

    results = run_job(run_local(_tasks(job), workers=2, on_result=kill_one))
    assert killed and all(isinstance(r, RankSummary) for r in results)
    assert [r.key for r in results] == [f"rank {k}" for k in range(6)]
