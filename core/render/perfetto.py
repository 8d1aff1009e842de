"""A trace annotated for Perfetto / chrome://tracing: the original events, untouched, plus
stallscope's own tracks in one extra process: per device an "idle: <cause>" slice for each idle
piece (adjacent pieces of one cause merged), the steps, and the advice cards as instant events.

    write_perfetto(report, out_path)    # report: core/analysis.analyze(load(path))

The original file is copied as a byte stream (gzip inflated on the fly) and stallscope's events
are spliced in right after the `[` of the TOP-LEVEL `"traceEvents"` array, found by following the
JSON's structure as it streams past (`_TopLevel`: a key of that name nested in `otherData` is
not it), so memory stays bounded by the added events and the time is one pass over the file.
The added events use a category the loader files away (Cat.OTHER), on their own pid, inside the
trace's window, and are never named like steps: the exported file opens in stallscope with the
same figures.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec
import numpy as np

from stallscope.core.causes import CAUSES, label
from stallscope.core.errors import StallscopeError
from stallscope.core.jobs import CancelFlag, Job, run_job
from stallscope.core.report import Report, device_json
from stallscope.core.session.reader import open_session, session_of_trace
from stallscope.core.session.record import Record, load_record

PID = 2_000_000_000   # stallscope's tracks: one process no profiler uses
CAT = ""              # a category the loader knows and leaves out of the analysis
STEPS_TID, CARDS_TID, WINDOWS_TID = 1, 2, 3
MAX_RUN_POINTS = 20_000  # per counter track: a whole run's rows, folded beyond this
# counter tracks of the whole run: (track, [(series, column of _run_rows)])
RUN_COUNTERS = (("run: step time (ms)", [("mean", "wall")]),
                ("run: data wait (ms)", [("mean", "wait")]),
                ("run: memory (MB)", [("RSS", "rss"), ("CUDA allocated", "cuda")]))
CHUNK = 1 << 20
_OUTSIDE = re.compile(rb'["{}\[\],:]')  # what moves the structure outside strings
_INSIDE = re.compile(rb'["\\]')           # what ends or escapes within a string
_BLANK = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark before the JSON
_KEY = "traceEvents"
_MAX_KEY = 64  # a top-level key longer than this cannot be "traceEvents", escapes and all


def merged_idle(codes: np.ndarray, spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Idle pieces with adjacent pieces of one cause joined: (spans (K, 2), codes (K,))."""
    if len(spans) == 0:
        return spans.reshape(0, 2), codes
    new = np.r_[True, (codes[1:] != codes[:-1]) | (spans[1:, 0] != spans[:-1, 1])]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(spans) - 1]
    return np.column_stack([spans[first, 0], spans[last, 1]]), codes[first]


def stallscope_events(report: Report) -> list[dict]:
    """stallscope's tracks as Chrome trace events (a few per idle gap; no per-op events)."""
    out: list[dict] = [_meta("process_name", 0, "stallscope"),
                       _meta("process_sort_index", 0, None, sort_index=-1),
                       _meta("thread_name", STEPS_TID, "steps"),
                       _meta("thread_name", CARDS_TID, "advice")]
    for i, (dev, stats) in enumerate(report.devices.items()):
        tid = 10 + i
        out.append(_meta("thread_name", tid, f"GPU {dev} idle by cause"))
        spans, codes = merged_idle(stats.cause_codes, stats.cause_spans)
        for (lo, hi), code in zip(spans.tolist(), codes.tolist(), strict=True):
            cause = CAUSES[code]
            out.append({"ph": "X", "cat": CAT, "name": f"idle: {label(cause)}", "pid": PID,
                        "tid": tid, "ts": lo, "dur": hi - lo,
                        "args": {"cause": cause, "device": device_json(dev)}})
    for step in report.steps:
        out.append({"ph": "X", "cat": CAT, "name": f"step {step.name.rpartition('#')[2]}",
                    "pid": PID, "tid": STEPS_TID, "ts": step.start_us, "dur": step.dur_us,
                    "args": {"step": step.name, "data_loading_us": step.data_loading_us}})
    lo = report.window[0]
    for a in report.advice:
        at = a.focus[0] if a.focus else lo
        out.append({"ph": "i", "s": "t", "cat": CAT, "name": a.title, "pid": PID,
                    "tid": CARDS_TID, "ts": at,
                    "args": {"id": a.id, "evidence": a.evidence, "fix": a.fix,
                             "saving_us": a.saving_us, "device": device_json(a.device)}})
    return out


def whole_run_events(rec: Record, report: Report) -> list[dict]:
    """A session's whole run (record.bin) beside the profiled window: counter tracks of step
    time, data wait and memory (RSS, CUDA allocated) from the run's first step to its last,
    and each profiled window as a slice, on the trace's clock. The clocks are tied by the
    steps both hold (the trace's ProfilerStep#N is the record's step N); [] when none is."""
    offset = _record_offset_us(rec, report)
    if offset is None:
        return []
    start_s, cols = _run_rows(rec)
    ts = start_s * 1e6 + offset
    out = [_meta("thread_name", WINDOWS_TID, "profiled windows")]
    for name, keys in RUN_COUNTERS:
        for i in range(len(ts)):
            args = {label_: round(float(cols[key][i]), 3) for label_, key in keys
                    if np.isfinite(cols[key][i])}
            if args:
                out.append({"ph": "C", "cat": CAT, "name": name, "pid": PID,
                            "ts": float(ts[i]), "args": args})
    rows = {int(n): i for i, n in enumerate(rec.steps["n"])}
    end_s = rec.steps["t"].astype(np.float64)
    for w in rec.windows:  # its steps at full resolution (a window folded into blocks: none)
        if w.first not in rows or w.last not in rows:
            continue
        first = rows[w.first]
        lo = (end_s[first] - float(np.nan_to_num(rec.steps["wall_ms"][first])) / 1e3) * 1e6
        lo, hi = lo + offset, end_s[rows[w.last]] * 1e6 + offset
        out.append({"ph": "X", "cat": CAT, "name": f"profiled steps {w.first}-{w.last}",
                    "pid": PID, "tid": WINDOWS_TID, "ts": float(lo), "dur": float(hi - lo),
                    "args": {"trace": w.trace}})
    return out


def session_run_events(trace: Path, report: Report) -> tuple[list[dict], str]:
    """The whole run of the session `trace` was recorded in, as counter tracks, and a line
    saying what was added (or why nothing was); ([], "") for a trace outside a session."""
    folder = session_of_trace(trace)
    if folder is None:
        return [], ""
    try:
        rec = load_record(open_session(folder))
    except StallscopeError as exc:
        return [], f"whole run not added: {exc}"
    if rec is None:
        return [], f"whole run not added: {folder.name} has no record.bin (an older session)"
    events = whole_run_events(rec, report)
    if not events:
        return [], (f"whole run not added: none of {trace.name}'s steps is in "
                    f"{rec.path.name}, so the two clocks cannot be tied")
    return events, (f"whole run: {rec.n_steps:,} steps from {rec.path.name} as counter tracks "
                    "(step time, data wait, memory) beside the profiled window")


def _record_offset_us(rec: Record, report: Report) -> float | None:
    """trace µs - record seconds x 1e6, the median over the steps both hold (a step's start:
    the record's end of step minus its wall time; the trace's ProfilerStep#N start)."""
    rows = {int(n): i for i, n in enumerate(rec.steps["n"])}
    diffs = []
    for step in report.steps:
        number = step.name.rpartition("#")[2]
        i = rows.get(int(number)) if number.isdigit() else None
        if i is not None and np.isfinite(rec.steps["wall_ms"][i]):
            start_s = float(rec.steps["t"][i]) - float(rec.steps["wall_ms"][i]) / 1e3
            diffs.append(step.start_us - start_s * 1e6)
    return float(np.median(diffs)) if diffs else None


def _run_rows(rec: Record) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Blocks (their means and peaks) then recent steps, in time order: (start s, steps per
    row, columns), folded into at most MAX_RUN_POINTS rows (means weighted by steps)."""
    b, s = rec.blocks, rec.steps
    count = np.concatenate([b["count"], np.ones(len(s))]).astype(np.float64)
    wall_sum = np.concatenate([b["wall_sum"], np.nan_to_num(s["wall_ms"])]).astype(np.float64)
    sums = {"wall": wall_sum,
            "wait": np.concatenate([b["wait_sum"], np.nan_to_num(s["data_wait_ms"])])}
    peaks = {"rss": np.concatenate([b["rss_max"], s["rss_mb"]]),
             "cuda": np.concatenate([b["cuda_allocated_max"], s["cuda_allocated_mb"]])}
    end = np.concatenate([b["t"], s["t"]]).astype(np.float64)
    start = end - wall_sum / 1e3
    order = np.argsort(start, kind="stable")
    start, count = start[order], count[order]
    sums = {k: v[order].astype(np.float64) for k, v in sums.items()}
    peaks = {k: v[order].astype(np.float64) for k, v in peaks.items()}
    if len(start) > MAX_RUN_POINTS:
        starts = np.arange(0, len(start), -(-len(start) // MAX_RUN_POINTS))
        start, count = start[starts], np.add.reduceat(count, starts)
        sums = {k: np.add.reduceat(v, starts) for k, v in sums.items()}
        peaks = {k: np.fmax.reduceat(v, starts) for k, v in peaks.items()}
    return start, {**{k: v / count for k, v in sums.items()}, **peaks}


def _meta(name: str, tid: int, value, **args) -> dict:
    return {"ph": "M", "name": name, "pid": PID, "tid": tid,
            "args": {"name": value, **args} if value is not None else args}


def _open_source(path: Path):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")  # noqa: SIM115 - closed by caller


def _open_out(path: Path):
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    f = gzip.open(tmp, "wb", compresslevel=6) if path.name.endswith(".gz") else open(tmp, "wb")
    return tmp, f


def write_perfetto(report: Report, out: str | os.PathLike, extra: Sequence[dict] = ()) -> int:
    """The annotated trace at `out` (gzip'd when it ends in .gz); returns the events added.
    extra: more of stallscope's events (whole_run_events: a session's whole run)."""
    return run_job(write_perfetto_job(report, out, extra=extra))


def write_perfetto_job(report: Report, out: str | os.PathLike,
                       cancel: CancelFlag | None = None, extra: Sequence[dict] = ()) -> Job[int]:
    """write_perfetto as a job: yields (bytes copied, the trace file's size); the GUI runs it
    in a JobWorker. A cancelled or failed export leaves no file behind."""
    src_path, out = Path(report.trace.path), Path(out)
    if out.resolve() == src_path.resolve():
        raise StallscopeError(f"{out}: the export would overwrite the trace it reads")
    added = stallscope_events(report) + list(extra)
    payload = msgspec.json.encode(added)[1:-1]  # the events, comma-joined
    try:
        tmp, dst = _open_out(out)
    except OSError as exc:
        raise StallscopeError(f"{out}: cannot write ({exc.strerror or exc})") from None
    total = max(1, src_path.stat().st_size)
    try:
        with _open_source(src_path) as src, dst:
            for _ in _splice(src, dst, payload, src_path):
                if cancel is not None:
                    cancel.check()
                yield min(_raw_offset(src), total), total
        os.replace(tmp, out)
    except OSError as exc:
        raise StallscopeError(f"{out}: cannot write ({exc.strerror or exc})") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return len(added)


class _TopLevel:
    """Follows a JSON text's structure chunk by chunk until the `[` that opens the top-level
    event list: a bare array's own, or the value of the top-level object's "traceEvents" key
    (escapes in the key decoded as a JSON reader would)."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = self.escaped = False
        self.key: bytearray | None = None   # a top-level key being read
        self.last_key: bytes | None = None  # the last top-level key read, until its ':'
        self.value_of: bytes | None = None  # the key whose value comes next
        self.started = False

    def feed(self, data: bytes) -> int | None:
        """Offset in `data` just past the event list's `[`, or None (not in this chunk)."""
        i, n = 0, len(data)
        while i < n:
            if self.in_string:
                i = self._string(data, i)
                continue
            if not self.started or self.value_of is not None:
                while i < n and (data[i] in _BLANK or (not self.started and data[i] in _BOM)):
                    i += 1
                if i == n:
                    return None
                if not self.started:
                    self.started = True
                    if data[i:i + 1] == b"[":
                        return i + 1
                elif self.value_of is not None:
                    key, self.value_of = self.value_of, None
                    if self.depth == 1 and data[i:i + 1] == b"[" and _decoded(key) == _KEY:
                        return i + 1
            m = _OUTSIDE.search(data, i)
            if m is None:
                return None
            c, i = data[m.start()], m.end()
            if c == 0x22:  # '"'
                self.in_string = True
                self.key = bytearray() if self.depth == 1 and self.last_key is None else None
            elif c in b"{[":
                self.depth += 1
                self.last_key = None
            elif c in b"}]":
                self.depth -= 1
                self.last_key = None
            elif c == 0x3A and self.depth == 1:  # ':'
                self.value_of, self.last_key = self.last_key, None
            elif c == 0x2C:  # ','
                self.last_key = None
        return None

    def _string(self, data: bytes, i: int) -> int:
        """Past the string's bytes in data[i:] (or to its end); a top-level key is kept."""
        if self.escaped:
            self.escaped = False
            self._keep(data[i:i + 1])
            return i + 1
        m = _INSIDE.search(data, i)
        end = m.start() if m else len(data)
        self._keep(data[i:end])
        if m is None:
            return len(data)
        if data[end] == 0x5C:  # a backslash: the next byte is escaped
            self._keep(b"\\")
            self.escaped = True
            return end + 1
        self.in_string = False
        if self.key is not None:
            self.last_key, self.key = bytes(self.key), None
        else:
            self.last_key = b"" if self.depth == 1 else None  # a value: not a key
        return end + 1

    def _keep(self, part: bytes) -> None:
        if self.key is not None:
            self.key += part[:_MAX_KEY + 1 - len(self.key)]


def _decoded(key: bytes) -> str | None:
    if len(key) > _MAX_KEY:
        return None
    try:
        return json.loads(b'"' + key + b'"')
    except ValueError:
        return None


def _splice(src, dst, payload: bytes, name: Path) -> Iterator[None]:
    """Copy src to dst with `payload` (comma-joined events) first in its TOP-LEVEL event
    array; yields after each chunk copied past the splice."""
    scan = _TopLevel()
    while True:
        chunk = src.read(CHUNK)
        if not chunk:
            raise StallscopeError(f"{name}: no top-level traceEvents array to add to")
        at = scan.feed(chunk)
        if at is not None:
            break
        dst.write(chunk)
        yield
    head = chunk
    rest = head[at:]
    while not rest.strip() and (more := src.read(CHUNK)):
        rest += more
    empty = rest.lstrip()[:1] == b"]"
    dst.write(head[:at])
    dst.write(payload)
    if payload and not empty:
        dst.write(b",")
    dst.write(rest)
    while chunk := src.read(CHUNK):
        dst.write(chunk)
        yield


def _raw_offset(src) -> int:
    """How far into the file (compressed bytes) a source stream has read."""
    try:
        return (getattr(src, "fileobj", None) or src).tell()  # a GzipFile: its raw file
    except (OSError, ValueError):
        return 0
