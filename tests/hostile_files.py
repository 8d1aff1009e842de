"""Builders of hostile trace files, shared by tests/core/test_trace_hostile.py and
tests/bench/bench_hostile.py.

`repeated_gzip` writes gigabytes of text as a few megabytes of gzip without compressing them:
one block is deflated once, ending in a full flush (byte-aligned, no back-references across it),
and that segment is written again and again. The trailer can be made to lie.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path


def step_events() -> list[dict]:
    """The smallest trace worth analysing: one step, one CPU op, one kernel."""
    return [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
             "ts": 0, "dur": 100},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10,
             "dur": 20},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 15, "dur": 30,
             "args": {"device": 0, "stream": 7}}]


GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def _segment(data: bytes, level: int = 9) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush(zlib.Z_FULL_FLUSH)


def _final() -> bytes:
    return zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS).flush(zlib.Z_FINISH)


def repeated_gzip(path: Path, block: bytes, repeats: int, head: bytes = b"", tail: bytes = b"",
                  trailer_size: int | None = None, members: int = 1, level: int = 9) -> int:
    """gzip of head + block * repeats + tail, split into `members` gzip members (the repeats
    shared out among them). trailer_size: the size the last member's trailer claims (None: the
    truth, with the right CRC). Returns the uncompressed size."""
    seg = _segment(block, level)
    per = [repeats // members + (i < repeats % members) for i in range(members)]
    total = 0
    with open(path, "wb") as f:
        for i, n in enumerate(per):
            text_head = head if i == 0 else b""
            text_tail = tail if i == members - 1 else b""
            f.write(GZIP_HEADER)
            crc = 0
            if text_head:
                f.write(_segment(text_head))
                crc = zlib.crc32(text_head, crc)
            for _ in range(n):
                f.write(seg)
                if trailer_size is None:
                    crc = zlib.crc32(block, crc)
            if text_tail:
                f.write(_segment(text_tail))
                crc = zlib.crc32(text_tail, crc)
            f.write(_final())
            size = len(text_head) + n * len(block) + len(text_tail)
            total += size
            claim = size if trailer_size is None or i < members - 1 else trailer_size
            f.write(struct.pack("<II", crc & 0xFFFFFFFF, claim & 0xFFFFFFFF))
    return total


def deep_args_trace(depth: int) -> bytes:
    """One valid step and one event whose args nest `depth` lists deep."""
    step = (b'{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, '
            b'"tid": 1, "ts": 0, "dur": 100}')
    deep = b'{"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"a": ' + \
        b"[" * depth + b"]" * depth + b"}}"
    return b'{"traceEvents": [' + step + b", " + deep + b"]}"


# The CLI, reporting its peak RSS (VmHWM of its own memory map: a child forked from a big test
# process would count that process's pages in its rusage peak).
_CLI_WITH_PEAK = """
import atexit, os, sys
from stallscope.core import cli
def peak():
    with open("/proc/self/status") as f, open(os.environ["PEAK_OUT"], "w") as out:
        out.write(next(line for line in f if line.startswith("VmHWM")).split()[1])
atexit.register(peak)
sys.exit(cli.main(sys.argv[1:]))
"""


def cli_with_peak(*args, budget: int | None = None, python_flags=(), timeout: float = 120):
    """`stallscope-cli ARGS` in a child: (returncode, stdout, stderr, seconds, peak RSS bytes)."""
    env = dict(os.environ)
    if budget is not None:
        env["STALLSCOPE_MEMORY_LIMIT"] = str(budget)
    with tempfile.TemporaryDirectory() as d:
        env["PEAK_OUT"] = os.path.join(d, "peak")
        t = time.perf_counter()
        out = subprocess.run([sys.executable, *python_flags, "-c", _CLI_WITH_PEAK,
                              *map(str, args)], capture_output=True, text=True, env=env,
                             timeout=timeout)
        seconds = time.perf_counter() - t
        with open(env["PEAK_OUT"]) as f:
            peak = int(f.read()) * 1024
    return out.returncode, out.stdout, out.stderr, seconds, peak
