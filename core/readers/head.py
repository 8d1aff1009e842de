"""What a file's name and first MiB say about it, without loading it: is it a trace, its rank and
job signature (distributedInfo), and when it was recorded (Kineto's timestamp in the name first).

core/folder.py plans folders with these; the rules are written out there.
(The trace loader reads whole files: core/readers/source.py.)
"""

from __future__ import annotations

import calendar
import gzip
import json
import re
import time
import zlib
from pathlib import Path
from typing import TypeGuard

from stallscope.core.readers.source import first_non_blank

RANK_RE = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)  # rank<N> in a file name

HEAD_BYTES = 1 << 20      # how much of each file's (decompressed) head is read

_EPOCH_RE = re.compile(r"(?:^|[._-])(\d{10}|\d{13}|\d{16}|\d{19})(?=[._-]|$)")
_RUNNER_RE = re.compile(r"(?:^|[._-])(\d{8})-(\d{6})(?:-(\d{3}))?(?=[._-]|$)")
_MONTH_RE = re.compile(r"(?:^|[._-])(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)_(\d{1,2})_"
                       r"(\d{2})_(\d{2})_(\d{2})(?=[._-]|$)")
_MONTHS = {m: i for i, m in enumerate(calendar.month_abbr) if m}
_BASE_TIME_RE = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d{1,20})')
_FIRST_TS_RE = re.compile(rb'"ts"\s*:\s*"?(\d{1,20}(?:\.\d*)?)')
_EARLIEST, _LATEST = 946684800.0, 4102444800.0  # 2000-01-01 .. 2100-01-01: plausible stamps


def rank_in_name(name: str) -> int | None:
    """`rank<N>` (rank_3, rank-3, RANK3) in a file name, else None."""
    m = RANK_RE.search(name)
    return int(m.group(1)) if m else None


def read_head(f: Path) -> tuple[bytes, bool] | str:
    """Up to HEAD_BYTES of the (decompressed) file, and whether that is all of it."""
    chunks: list[bytes] = []
    size = 0
    gz = False
    try:
        with open(f, "rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            src = gzip.GzipFile(fileobj=raw) if gz else raw
            while size <= HEAD_BYTES:
                block = src.read(65536)
                if not block:
                    break
                chunks.append(block)
                size += len(block)
    except (EOFError, gzip.BadGzipFile, zlib.error):
        if not chunks:  # a cut stream with a readable head is left to the load to name
            return "not a valid gzip file"
        return b"".join(chunks)[:HEAD_BYTES], False
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    data = b"".join(chunks)
    return data[:HEAD_BYTES], size <= HEAD_BYTES


def looks_like_trace(data: bytes, whole: bool) -> bool:
    first = first_non_blank(data)
    start = data[first:first + 1] if first is not None else b""
    if start == b"[":
        return True
    if start != b"{":
        return False
    return b'"traceEvents"' in data or not whole  # a huge head may hide it: the load will tell


_DIST_RE = re.compile(rb'"distributedInfo"\s*:\s*')


_JOB_KEYS = ("backend", "world_size", "pg_count", "nccl_version")


def distributed_info(data: bytes) -> tuple[int | None, int | None, tuple]:
    """rank, world_size and the job signature from distributedInfo in the head."""
    m = _DIST_RE.search(data)
    if not m:
        return None, None, ()
    text = data[m.end():m.end() + 65536].decode("utf-8", "replace")
    try:
        info, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:  # cut in the middle: read the two numbers directly
        info = {k: int(v) for k, v in re.findall(r'"(rank|world_size)"\s*:\s*(\d+)', text[:4096])}
    if not isinstance(info, dict):
        return None, None, ()
    rank, world = info.get("rank"), info.get("world_size")
    job = tuple(v if isinstance(v, (str, int, float)) else None
                for v in (info.get(k) for k in _JOB_KEYS))
    return ((rank if _count(rank) else None), (world if _count(world) and world > 0 else None),
            job)


def _count(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def file_time(f: Path, mtime: float, head: bytes = b"") -> tuple[float, str]:
    """(epoch seconds, source): Kineto's timestamp in the name, the trace's wall clock at its
    first event (baseTimeNanoseconds + the first `ts`, or a first `ts` that reads as a date),
    or mtime."""
    stem = f.name
    for stamp in _EPOCH_RE.finditer(stem):
        digits = stamp.group(1)
        t = int(digits) / 10 ** (len(digits) - 10)
        if _EARLIEST <= t <= _LATEST:
            return t, "name"
    m = _RUNNER_RE.search(stem)
    if m:
        try:
            t = time.mktime(time.strptime(m.group(1) + m.group(2), "%Y%m%d%H%M%S"))
            return t + int(m.group(3) or 0) / 1000.0, "name"
        except (ValueError, OverflowError):
            pass
    m = _MONTH_RE.search(stem)
    if m:
        t = _month_day_time(m, mtime)
        if t is not None:
            return t, "name"
    first_ts = _first_ts(head)
    b = _BASE_TIME_RE.search(head)
    if b:
        t = int(b.group(1)) / 1e9
        if _EARLIEST <= t <= _LATEST:  # the clock's start; the first event is `ts` µs after it
            return t + (first_ts if 0 <= first_ts < 100 * 365 * 86400 else 0.0), "trace"
    if _EARLIEST <= first_ts <= _LATEST:
        return first_ts, "trace"
    return mtime, "mtime"


def _first_ts(head: bytes) -> float:
    """The first event's `ts` in seconds (0 without one)."""
    ts = _FIRST_TS_RE.search(head, max(head.find(b'"traceEvents"'), 0))
    return float(ts.group(1)) / 1e6 if ts else 0.0


def _month_day_time(m: re.Match, mtime: float) -> float | None:
    """`Apr_03_18_51_38` has no year: the year that puts it at or before the file's mtime."""
    month, day, hh, mm, ss = _MONTHS[m.group(1)], *(int(g) for g in m.groups()[1:])
    year = time.localtime(mtime).tm_year
    for y in (year, year - 1):
        try:
            t = time.mktime((y, month, day, hh, mm, ss, 0, 0, -1))
        except (ValueError, OverflowError):
            return None
        if t <= mtime + 86400:
            return t
    return None
