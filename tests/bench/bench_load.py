"""Benchmark: load + analyse a big trace built by tiling a real fixture.

    .venv/bin/python tests/bench/bench_load.py [--size-mb 1024] [--repeat 3] [--keep PATH]
    .venv/bin/python tests/bench/bench_load.py --phases PATH    # where analyze's time goes

Times, alternating, `--repeat` times: (a) read + msgspec typed decode alone of the whole document
into the reader's own event struct (readers.trace_events.AnyPhase; timed inside a child, after
its start-up), (b) the full `stallscope-cli analyze --json` in a fresh process, and (c) that
process's peak RSS; (b) runs as an installed package does, reading its .pyc files (written on a
warm-up run under a temporary PYTHONPYCACHEPREFIX; `--no-pyc` compiles every module each run, as
under PYTHONDONTWRITEBYTECODE). Both wall and CPU time (user + sys) are given:
on a shared machine the CPU time is the steadier figure. The ratios compare the fastest run of
each (the least disturbed) and give the median of the pairs.
Goals: (b) <= 1.3x (a) on the ~1 GB trace in wall and CPU time (issue 34; issue 15 asked 1.5x),
<= 2.0x on a 300 MB one; (c) <= 2x the JSON size.
`--phases` times analyze's steps in one process (CPU, user and system time each): imports,
reading, decoding into columns, packing them (finish), the analysis.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from stallscope.core.readers.trace_events import AnyPhase

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "traces"


class Doc(msgspec.Struct):
    """The document as the reader's own typed events (any phase), nothing else."""

    traceEvents: list[AnyPhase] = []


def tile(fixture: Path, out: Path, size_mb: int) -> int:
    """Write time-shifted copies of the fixture's events until the file reaches size_mb."""
    with gzip.open(fixture) as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    xs = [e for e in events if "ts" in e]
    span = max(e["ts"] + e.get("dur", 0) for e in xs) - min(e["ts"] for e in xs) + 1000
    copies = 0
    with open(out, "wb") as f:
        head = msgspec.json.encode(doc)[:-1]
        f.write(head + (b"," if len(doc) else b"") + b'"traceEvents":[')
        first = True
        while f.tell() < size_mb * 2**20:
            shifted = []
            for e in events:
                e = dict(e)
                if "ts" in e:
                    e["ts"] = e["ts"] + copies * span
                name = e.get("name", "")
                if isinstance(name, str) and name.startswith("ProfilerStep#"):
                    e["name"] = f"ProfilerStep#{int(name[13:]) + 1000 * copies}"
                shifted.append(e)
            body = msgspec.json.encode(shifted)[1:-1]
            f.write((b"" if first else b",") + body)
            first = False
            copies += 1
        f.write(b"]}")
    return copies


CHILD_ENV: dict[str, str] | None = None  # None: this process's environment


def with_bytecode(prefix: Path) -> dict[str, str]:
    """The environment of a CLI run as installed: Python writes and reads its .pyc files (here
    under `prefix`, outside the checkout), even where PYTHONDONTWRITEBYTECODE is set (then every
    run compiles ~120 modules again: ~0.1 s of CPU a run)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    return env


def timed(argv: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS bytes) of `stallscope-cli *argv` in a fresh process; exits with
    its stderr when it fails."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "stallscope.core.cli", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=CHILD_ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{argv[0]} failed: {err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def run_cli(path: Path) -> tuple[float, float, int]:
    """timed() of `stallscope-cli analyze --json PATH`."""
    return timed(["analyze", "--json", str(path)])


def bare_decode(path: Path) -> tuple[float, float, int]:
    """(wall s, CPU s, events) of reading the file and decoding it into typed structs, timed
    inside a fresh process (so that this one stays small: a child forked from a big parent counts
    the parent's pages in its peak RSS)."""
    out = subprocess.run([sys.executable, __file__, "--bare", str(path)], check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def _bare(path: Path) -> None:
    t, c = time.perf_counter(), time.process_time()
    data = path.read_bytes()
    doc = msgspec.json.decode(data, type=Doc)
    print(time.perf_counter() - t, time.process_time() - c, len(doc.traceEvents))


def _phases(path: Path) -> None:
    import resource

    def usage() -> tuple[float, float]:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime, r.ru_stime

    last = usage()

    def lap(label: str) -> None:
        nonlocal last
        now = usage()
        user, system = now[0] - last[0], now[1] - last[1]
        print(f"{label:>16}: {user + system:6.3f} s CPU  (user {user:.3f}, system {system:.3f})")
        last = now

    from stallscope.core import readers
    from stallscope.core import trace as tr
    from stallscope.core.analysis import analyze
    from stallscope.core.jobs import CancelFlag, run_job
    from stallscope.core.readers.heap import reusing_freed_memory
    from stallscope.core.readers.source import read_bytes
    lap("start + imports")
    cancel = CancelFlag()
    with reusing_freed_memory():  # as trace.load_job does
        data = run_job(read_bytes(path, cancel, readers.sniffer(path)))
        lap("read")
        decoded = run_job(readers.decode(path, data, cancel))
        del data
        lap("decode, columns")
        fields = decoded.cols.finish(decoded.device_properties)
    trace = tr.Trace(path=path, **fields, notes=decoded.notes)
    trace.device_kind = tr.device_kind(decoded.cols.cats)
    lap("finish")
    analyze(trace)
    lap("analysis")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{trace.n_events:,} events, peak RSS {peak:,.0f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--fixture", default="kineto_nw0")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="write the tiled trace here and keep it (reused if present)")
    ap.add_argument("--tile-only", help=argparse.SUPPRESS)
    ap.add_argument("--bare", help=argparse.SUPPRESS)
    ap.add_argument("--phases", metavar="PATH", help="time analyze's steps on this trace")
    ap.add_argument("--no-pyc", action="store_true",
                    help="keep PYTHONDONTWRITEBYTECODE as set: the CLI compiles every module "
                         "each run (by default it runs as installed, with its .pyc files)")
    args = ap.parse_args()
    if args.bare:
        return _bare(Path(args.bare))
    if args.phases:
        return _phases(Path(args.phases))
    fixture = next(FIXTURES.glob(args.fixture + "*"))
    if args.tile_only:
        t = time.perf_counter()
        copies = tile(fixture, Path(args.tile_only), args.size_mb)
        print(f"tiled {copies} copies of {fixture.name} in {time.perf_counter() - t:.1f} s")
        return
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp()) / "tiled.json"
    if not tmp.exists():  # in a child, so that this process stays small for the fork below
        subprocess.run([sys.executable, __file__, "--tile-only", str(tmp), "--size-mb",
                        str(args.size_mb), "--fixture", args.fixture], check=True)
    size = tmp.stat().st_size
    print(f"trace: {tmp} {size / 2**20:,.0f} MiB")
    global CHILD_ENV
    if not args.no_pyc:
        CHILD_ENV = with_bytecode(Path(tempfile.mkdtemp()) / "pyc")
        run_cli(fixture)  # writes the .pyc files
        print("  the CLI runs with its .pyc files (--no-pyc: compiling each run)")

    cli, bare = [], []
    for i in range(args.repeat):
        cli.append(run_cli(tmp))
        bare.append(bare_decode(tmp))
        (bw, bc, n), (aw, ac, rss) = bare[-1], cli[-1]
        print(f"  run {i + 1}: (a) {bw:.2f} s wall {bc:.2f} s CPU   (b) {aw:.2f} s wall "
              f"{ac:.2f} s CPU   (c) {rss / 2**20:,.0f} MiB")
    n = bare[0][2]
    goal = 1.3 if size > 700 * 2**20 else 2.0
    for label, k in (("wall", 0), ("CPU", 1)):
        a, b = min(r[k] for r in bare), min(r[k] for r in cli)
        med = statistics.median(c[k] / r[k] for c, r in zip(cli, bare, strict=True))
        print(f"{label:>4}: (a) decode alone {a:.2f} s ({n:,} events)   (b) analyze {b:.2f} s   "
              f"= {b / a:.2f}x fastest-to-fastest, {med:.2f}x median pair  [goal <= {goal}x]")
    rss = max(r[2] for r in cli)
    print(f"(c) peak RSS {rss / 2**20:,.0f} MiB = {rss / size:.2f}x the JSON  [goal <= 2x]")
    if not args.keep:
        tmp.unlink()
        tmp.parent.rmdir()


if __name__ == "__main__":
    main()
