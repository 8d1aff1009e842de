"""Benchmark: load + analyse a ~1 GB trace built by tiling a real fixture.

    .venv/bin/python tests/bench/bench_load.py [--size-mb 1024] [--fixture kineto_nw0]

Times, in one run: (a) msgspec typed decode alone of the whole document, (b) the full
`stallscope-cli analyze --json` in a fresh process, (c) that process's peak RSS.
Goals: (b) <= 2x (a); peak RSS <= 2x the JSON size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "traces"


class Args(msgspec.Struct):
    device: int | None = None
    stream: int | None = None


class Event(msgspec.Struct):
    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float | None = None
    dur: float | None = None
    args: Args | None = None


class Doc(msgspec.Struct):
    traceEvents: list[Event] = []


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--fixture", default="kineto_nw0")
    ap.add_argument("--keep", help="write the tiled trace here and keep it")
    ap.add_argument("--tile-only", help=argparse.SUPPRESS)
    args = ap.parse_args()
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

    # The CLI runs first: a child forked after (a) would count the parent's pages in its peak.
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "stallscope.core.cli", "analyze", "--json",
                             str(tmp)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    analyze_s = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        print(proc.stderr.read().decode())
    t = time.perf_counter()
    data = tmp.read_bytes()
    doc = msgspec.json.decode(data, type=Doc)
    decode_s = time.perf_counter() - t
    n = len(doc.traceEvents)
    del doc, data

    rss = usage.ru_maxrss * 1024
    print(f"(a) read + msgspec typed decode alone: {decode_s:.2f} s ({n:,} events)")
    print(f"(b) stallscope-cli analyze --json:     {analyze_s:.2f} s  "
          f"= {analyze_s / decode_s:.2f}x (a)  [goal <= 2x]")
    print(f"(c) peak RSS:                          {rss / 2**20:,.0f} MiB "
          f"= {rss / size:.2f}x JSON size  [goal <= 2x]")
    if not args.keep:
        tmp.unlink()


if __name__ == "__main__":
    main()
