"""Benchmark: what naming the culprits costs (issue 22) on a big trace built by tiling a real
fixture (tracelens_resnet: Python frames, autograd threads, NCCL; or any fixture given).

    .venv/bin/python tests/bench/bench_culprits.py [--fixture tracelens_resnet] [--size-mb 300]
                                                   [--repeat 3]

Loads the trace once, then times, alternating, `analyze()` as shipped and `analyze()` with the
explanation step (window kind, culprits, collectives) left out; prints both (fastest and median)
and the share the explanation adds, also against load + analyze (what a user waits for).
Goal: the explanation adds at most 15% to load + analyze.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import FIXTURES, tile  # noqa: E402

from stallscope.core import analysis  # noqa: E402
from stallscope.core.trace import load  # noqa: E402


def timed(trace, explain: bool) -> float:
    original = analysis.explain
    if not explain:
        analysis.explain = lambda *a, **k: None
    try:
        t = time.perf_counter()
        analysis.analyze(trace)
        return time.perf_counter() - t
    finally:
        analysis.explain = original


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--fixture", default="tracelens_resnet")
    p.add_argument("--size-mb", type=int, default=300)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    fixture = sorted(FIXTURES.glob(args.fixture + "*"))[0]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.json"
        copies = tile(fixture, path, args.size_mb)
        t = time.perf_counter()
        trace = load(path)
        load_s = time.perf_counter() - t
    print(f"{fixture.name} x{copies}: {trace.n_events:,} events")
    with_, without = [], []
    for _ in range(args.repeat):
        with_.append(timed(trace, True))
        without.append(timed(trace, False))
    for label, xs in (("analyze()", with_), ("without explain", without)):
        print(f"{label:>16}: fastest {min(xs):.2f} s, median {statistics.median(xs):.2f} s")
    extra = min(with_) - min(without)
    print(f"load {load_s:.2f} s; explanation adds {extra:.2f} s: {extra / min(without):.0%} of "
          f"analyze(), {extra / (load_s + min(without)):.0%} of load + analyze (fastest runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
