"""Benchmark: `stallscope-cli export TRACE --perfetto OUT.json` on a big trace (a real fixture
tiled, as bench_load does) against `stallscope-cli analyze --json` of the same file, each in a
fresh process: wall, CPU and peak RSS. Goal (issue 24): the export takes about the time the
trace takes to load and analyse (the copy is one streamed pass; only stallscope's events are
held), and its peak memory is that of the analysis.

    .venv/bin/python tests/bench/bench_export.py [--size-mb 300] [--repeat 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import FIXTURES, tile, timed  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--fixture", default="kineto_nw4_worker0.1623212756351.pt.trace.json.gz")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "big.json"
        out = Path(tmp) / "big.perfetto.json"
        copies = tile(FIXTURES / args.fixture, trace, args.size_mb)
        print(f"trace   {trace.stat().st_size / 2**20:,.0f} MiB ({copies} copies of "
              f"{args.fixture})")
        best: dict[str, tuple[float, float, int]] = {}
        for _ in range(args.repeat):
            for name, argv in (("analyze", ["analyze", "--json", str(trace)]),
                               ("export", ["export", str(trace), "--perfetto", str(out)])):
                r = timed(argv)
                if name not in best or r[0] < best[name][0]:
                    best[name] = r
        for name, (wall, cpu, rss) in best.items():
            print(f"{name:8}{wall:7.2f} s wall {cpu:7.2f} s CPU  peak {rss / 2**20:,.0f} MiB")
        print(f"export / analyze: {best['export'][0] / best['analyze'][0]:.2f}x wall, "
              f"{best['export'][1] / best['analyze'][1]:.2f}x CPU; output "
              f"{out.stat().st_size / 2**20:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
