"""Benchmark: `stallscope-cli analyze` on hostile files, under a memory budget.

    .venv/bin/python tests/bench/bench_hostile.py [--budget-mb 1024] [--dir /tmp/hostile]
        [--third-pass]     # issue 29's files only (no 6 GiB gzip files to build)

Builds each file (gigabytes of text as a few MB of gzip, see tests/hostile_files.py), runs the
CLI on it in a fresh process with STALLSCOPE_MEMORY_LIMIT set, and prints its exit status, wall
time, peak RSS and the first line it printed. Goals (issue 14): each ends in exit 2 and one line
(or loads with its note) in under 2 s, with a peak RSS under 2x the budget.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hostile_files import cli_with_peak, deep_args_trace, repeated_gzip  # noqa: E402

MiB, GiB = 2**20, 2**30
SESSION = Path(__file__).resolve().parents[1] / "core" / "steady_sessions" / "io-2workers"
STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
        "ts": 0, "dur": 100}
KERNEL = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 15, "dur": 30,
          "args": {"device": 0, "stream": 7}}
HEAD = b'{"traceEvents": [' + json.dumps(STEP).encode() + b", "


def build(d: Path, third_only: bool = False) -> list[tuple[str, Path]]:
    """(what, path) for every hostile file; the big ones are written once and kept in d."""
    files: list[tuple[str, Path]] = []

    def gz(name, what, **kw):
        p = d / name
        if not p.exists():
            t = time.perf_counter()
            repeated_gzip(p, **kw)
            print(f"  built {name}: {p.stat().st_size / MiB:,.1f} MiB of gzip in "
                  f"{time.perf_counter() - t:.1f} s", flush=True)
        files.append((what, p))

    def plain(name, what, data: bytes):
        p = d / name
        p.write_bytes(data)
        files.append((what, p))

    if third_only:
        third_pass(d, gz, plain, files)
        return files
    spaces = b" " * (64 * MiB)
    gz("lying_trailer.json.gz", "6 GiB of spaces in the event list, trailer says 2 GiB",
       block=spaces, repeats=96, head=HEAD, tail=b"]}", trailer_size=6 * GiB, level=1)
    gz("small_trailer.json.gz", "6 GiB of spaces in the event list, trailer says 1 MiB",
       block=spaces, repeats=96, head=HEAD, tail=b"]}", trailer_size=MiB, level=1)
    gz("blank.json.gz", "6 GiB of spaces and no JSON", block=spaces, repeats=96, level=1)
    gz("members.json.gz", "6 GiB in 96 gzip members (each trailer says 64 MiB)",
       block=spaces, repeats=96, head=HEAD, tail=b"]}", members=96, level=1)
    gz("tiny_events.json.gz", "6 GiB of `{}, ` in the event list (JSON all along)",
       block=b"{}, " * (16 * MiB), repeats=96, head=HEAD, tail=b"{}]}", trailer_size=MiB,
       level=1)
    gz("text.json.gz", "6 GiB of text that is not JSON",
       block=b"lorem ipsum dolor " * (64 * MiB // 18), repeats=96, level=1)

    plain("deep_args.json", "args nested 100,000 deep", deep_args_trace(100_000))
    plain("brackets.json", "[ x 1,000,000", b"[" * 1_000_000)
    plain("unclosed.json", "an unclosed object 200,000 deep",
          b'{"traceEvents": [{"args": ' + b'{"a": ' * 200_000)
    events = [STEP, KERNEL]
    plain("props_string.json", "deviceProperties as a string",
          json.dumps({"deviceProperties": "A100", "traceEvents": events}).encode())
    plain("props_entry.json", "a deviceProperties entry that is no object",
          json.dumps({"deviceProperties": [{"id": 0}, 5], "traceEvents": events}).encode())
    plain("dist_string.json", "distributedInfo as a string",
          json.dumps({"distributedInfo": "rank 0", "traceEvents": events}).encode())
    plain("floats.json", "1e308 floats", json.dumps({"traceEvents": events + [
        dict(STEP, name="x", ts=1e308, dur=1e308)]}).encode())
    plain("hello.json", "hello world", b"hello world\n")
    for name, target, what in (("zero.json", "/dev/zero", "a symlink to /dev/zero"),
                               ("urandom.json.gz", "/dev/urandom", "a symlink to /dev/urandom")):
        p = d / name
        if not p.is_symlink():
            p.symlink_to(target)
        files.append((what, p))
    fifo = d / "fifo.json"
    if not fifo.exists():
        os.mkfifo(fifo)
    files.append(("a FIFO", fifo))
    third_pass(d, gz, plain, files)
    return files


def third_pass(d: Path, gz, plain, files: list) -> None:
    """Issue 29's files (added to `files`, as gz and plain do): bytes that cannot be a trace,
    wide text, many devices, a session whose run.json is hostile."""
    sparse = d / "sparse_2g.json"
    if not sparse.exists():
        with open(sparse, "wb") as f:
            f.write(HEAD)
            f.truncate(2 * GiB)  # a hole: NULs that take no disk
    files.append(("2 GiB sparse .json (JSON head, then NULs)", sparse))
    gz("zeros.json.gz", "1 GiB of NULs after a JSON head, gzip'd", block=b"\0" * (16 * MiB),
       repeats=64, head=HEAD, level=1)
    gz("no_event.json.gz", "512 MiB of one string, no event", block=b"a" * (16 * MiB),
       repeats=32, head=b'{"traceEvents": [], "otherData": {"x": "', tail=b'"}}', level=1)
    text = json.dumps({"traceEvents": [STEP, KERNEL]})
    plain("utf32.json", "UTF-32 text (with its BOM)", text.encode("utf-32"))
    plain("utf32le.json", "UTF-32LE text (no BOM)", text.encode("utf-32-le"))
    plain("devices_1000.json", "1,000 devices x 40 kernels", many_devices(1000, 40))
    session = d / "session_brackets"
    if not session.exists():
        shutil.copytree(SESSION, session)
        (session / "run.json").write_bytes(b"[" * (50 * MiB))
    files.append(("a session whose run.json is 50 MiB of [", session))


def many_devices(devices: int, kernels: int) -> bytes:
    """Steps on one thread, `kernels` launches per device, each device its own process."""
    events = [dict(STEP, name=f"ProfilerStep#{s}", ts=s * 10_000, dur=10_000) for s in range(3)]
    for dev in range(devices):
        events.append({"ph": "M", "name": "process_name", "pid": dev,
                       "args": {"name": f"GPU {dev}"}})
        for k in range(kernels):
            corr = dev * kernels + k
            events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                        "tid": 1, "ts": 12 + 700 * k, "dur": 5, "args": {"correlation": corr}},
                       {"ph": "X", "cat": "kernel", "name": "gemm", "pid": dev, "tid": 7,
                        "ts": 15 + 700 * k, "dur": 300,
                        "args": {"device": dev, "stream": 7, "correlation": corr}}]
    return json.dumps({"traceEvents": events}).encode()


def run(path: Path, budget: int) -> tuple[int, float, int, str]:
    """(exit status, wall s, peak RSS bytes, stderr) of `stallscope-cli analyze PATH`."""
    rc, _, err, wall, peak = cli_with_peak("analyze", path, budget=budget, timeout=600)
    return rc, wall, peak, err


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget-mb", type=int, default=1024)
    ap.add_argument("--dir", help="where the files are built and kept (default: a temp dir)")
    ap.add_argument("--third-pass", action="store_true",
                    help="only issue 29's files (no 6 GiB gzip files to build)")
    args = ap.parse_args()
    d = Path(args.dir or tempfile.mkdtemp(prefix="hostile-"))
    d.mkdir(parents=True, exist_ok=True)
    budget = args.budget_mb * MiB
    print(f"files in {d}; budget STALLSCOPE_MEMORY_LIMIT={budget} ({args.budget_mb} MiB)")
    files = build(d, args.third_pass)
    worst_t = worst_rss = 0.0
    print(f"{'file':<52} {'rc':>3} {'time':>7} {'peak RSS':>10}  first line")
    for what, p in files:
        rc, wall, rss, err = run(p, budget)
        lines = err.strip().splitlines()
        first = (lines[0] if lines else "(loaded)").replace(str(p), p.name)
        print(f"{what:<52} {rc:>3} {wall:>6.2f}s {rss / MiB:>7,.0f} MiB  "
              f"{'' if len(lines) <= 1 else f'[{len(lines)} lines] '}{first[:140]}")
        worst_t, worst_rss = max(worst_t, wall), max(worst_rss, rss)
    print(f"slowest {worst_t:.2f} s [goal < 2 s]; largest peak {worst_rss / MiB:,.0f} MiB = "
          f"{worst_rss / budget:.2f}x the budget [goal < 2x]")


if __name__ == "__main__":
    main()
