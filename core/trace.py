"""Load a torch.profiler / Kineto Chrome trace into sorted numpy columns.

Decoding is typed (msgspec structs); the event list is first split into `msgspec.Raw` slices of
the file's bytes so that only one batch of decoded structs lives at a time. Names and tracks are
interned; everything after `_Columns.finish` is numpy. Units: microseconds, float64, as in the file.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

import msgspec
import numpy as np

from stallscope.core.errors import TraceError
from stallscope.core.jobs import CancelFlag, Job, run_job
from stallscope.core.kineto import ANNOTATION_PREFIXES, GPU_CATS, Cat, category, is_step_name

TRACE_GLOBS = ("*.pt.trace.json", "*.pt.trace.json.gz")
LOOSE_GLOBS = ("*.json", "*.json.gz")
_BATCH = 65536
_READ_CHUNK = 8 << 20
# Memory needed per byte of JSON: the bytes themselves, one Raw slice per event, one batch of
# structs, and the columns (measured by tests/bench/bench_load.py).
_MEMORY_FACTOR = 1.6


# ----------------------------------------------------------------------------- typed decoding

class _Args(msgspec.Struct, gc=False):
    device: int | None = None
    stream: int | None = None
    correlation: int | None = None
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    nbytes: float | None = msgspec.field(default=None, name="Bytes")
    total_allocated: float | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: float | None = msgspec.field(default=None, name="Total Reserved")


class _Fields(msgspec.Struct, gc=False):
    """What stallscope reads of a complete (`X`) event."""

    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float | None = None
    dur: float | None = None
    args: _Args = msgspec.field(default_factory=_Args)


class _Event(_Fields):
    """Any event, for the lenient per-event path (a batch that failed the typed decode)."""

    ph: str = ""


# The fast path decodes a tagged union on `ph`: complete events and instants keep their fields,
# every other phase (flows, metadata, counters: a quarter of a Kineto trace) decodes to an empty
# struct without building its strings.
class _Complete(_Fields, tag_field="ph", tag="X"):
    pass


class _Instant(msgspec.Struct, gc=False, tag_field="ph", tag="i"):
    name: str = ""
    ts: float | None = None
    args: _Args = msgspec.field(default_factory=_Args)


class _InstantGlobal(_Instant, tag="I"):
    pass


_SKIPPED_PHASES = "BEbnestfSTFpPONDMRcCVv()"
_Skipped = tuple(msgspec.defstruct(f"_Skip{ord(c)}", [], gc=False, tag_field="ph", tag=c)
                 for c in _SKIPPED_PHASES)
_Tagged = _Complete | _Instant | _InstantGlobal
for _skip in _Skipped:
    _Tagged = _Tagged | _skip


class _Document(msgspec.Struct):
    traceEvents: list[msgspec.Raw] = []
    deviceProperties: list[dict] = []
    distributedInfo: dict | None = None


_event_decoder = msgspec.json.Decoder(_Event)
_event_decoder_lax = msgspec.json.Decoder(_Event, strict=False)
_batch_decoder = msgspec.json.Decoder(list[_Tagged])


# ----------------------------------------------------------------------------- the Trace

@dataclass
class MemorySamples:
    """`[memory]` instant events, sorted by ts. Totals are NaN where the trace has none."""

    ts: np.ndarray
    device_type: np.ndarray
    device_id: np.ndarray
    nbytes: np.ndarray
    total_allocated: np.ndarray
    total_reserved: np.ndarray

    def __len__(self) -> int:
        return len(self.ts)


@dataclass
class Trace:
    path: Path
    names: list[str]
    start: np.ndarray     # float64 µs, sorted
    end: np.ndarray       # float64 µs, start + dur
    dur: np.ndarray       # float64 µs as written in the file (exact, unlike end - start)
    cat: np.ndarray       # int8 Cat
    name: np.ndarray      # int32 index into names
    track: np.ndarray     # int32 index into tracks
    device: np.ndarray    # int32, -1 for CPU events
    stream: np.ndarray    # int32, -1 where absent
    corr: np.ndarray      # int64 args.correlation (launch <-> GPU op), -1 where absent
    tracks: list[tuple[str, str]]
    mem: MemorySamples
    device_properties: list[dict] = field(default_factory=list)
    rank: int | None = None
    world_size: int | None = None
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def n_events(self) -> int:
        return len(self.start)

    def gpu_devices(self) -> list[int]:
        gpu = np.isin(self.cat, np.array(GPU_CATS, dtype=np.int8))
        return sorted(int(d) for d in np.unique(self.device[gpu]))

    def step_indices(self) -> np.ndarray:
        """CPU `ProfilerStep#<digits>` events, in time order (GPU repeats are ignored)."""
        steps = self.mask_names(is_step_name)
        steps &= (self.cat != Cat.GPU_USER_ANNOTATION) & (self.device < 0)
        return np.flatnonzero(steps)

    def name_ids(self, predicate) -> np.ndarray:
        """Ids of the interned names for which predicate(name) holds."""
        return np.array([i for i, n in enumerate(self.names) if predicate(n)], dtype=np.int32)

    def mask_names(self, predicate) -> np.ndarray:
        return np.isin(self.name, self.name_ids(predicate))


# ----------------------------------------------------------------------------- public entry points

def load(path: str | os.PathLike, cancel: CancelFlag | None = None) -> Trace:
    return run_job(load_job(path, cancel))


def find_traces(path: str | os.PathLike) -> list[Path]:
    """Trace files in a folder, newest first: `*.pt.trace.json(.gz)` anywhere below it (a
    TensorBoard log dir, a session's traces/), else any `*.json(.gz)` directly in it."""
    root = Path(path)
    found = {p for pattern in TRACE_GLOBS for p in root.rglob(pattern) if p.is_file()}
    if not found:  # a session's run.json is no trace
        found = {p for pattern in LOOSE_GLOBS for p in root.glob(pattern)
                 if p.is_file() and p.name != "run.json"}
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)


def resolve(path: str | os.PathLike) -> Path:
    """The one trace file a path stands for: itself, or the newest trace in a folder."""
    p = Path(path)
    if not p.exists():
        raise TraceError(f"{p}: no such file or folder")
    if p.is_dir():
        traces = find_traces(p)
        if not traces:
            raise TraceError(f"{p}: folder holds no trace (*.pt.trace.json, *.json.gz)")
        return traces[0]
    return p


def load_job(path: str | os.PathLike, cancel: CancelFlag | None = None) -> Job[Trace]:
    """Yields (done, 1000): reading 0-400, decoding 400-1000."""
    cancel = cancel or CancelFlag()
    p = resolve(path)
    data = yield from _read_bytes(p, cancel)
    yield 400, 1000
    events, doc = _split_events(p, data)
    cols = _Columns()
    total = max(len(events), 1)
    for lo in range(0, len(events), _BATCH):
        cancel.check()
        cols.add(_decode_batch(events[lo:lo + _BATCH], cols, data))
        yield 400 + 600 * min(lo + _BATCH, total) // total, 1000
    del events, data
    trace = cols.finish(p)
    trace.device_properties = [d for d in doc.get("deviceProperties", []) if isinstance(d, dict)]
    trace.rank, trace.world_size = _rank_of(p, doc.get("distributedInfo"))
    if trace.n_events == 0 and len(trace.mem) == 0:
        reason = "; ".join(f"{n} {why}" for why, n in trace.dropped.items())
        raise TraceError(f"{p}: no usable trace events" + (f" ({reason})" if reason else ""))
    return trace


# ----------------------------------------------------------------------------- reading bytes

def _available_memory() -> int:
    override = os.environ.get("STALLSCOPE_MEMORY_LIMIT")
    if override:
        return int(float(override))
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62


def _uncompressed_size(p: Path, size: int) -> int:
    """gzip keeps the size mod 2**32 in its last 4 bytes; never trust it below the file size."""
    with open(p, "rb") as f:
        f.seek(max(size - 4, 0))
        isize = int.from_bytes(f.read(4), "little")
    while isize < size:
        isize += 1 << 32
    return isize


def _read_into(f, expected: int, cancel: CancelFlag) -> Job[bytearray]:
    """Read a stream into one preallocated buffer: joining chunks would hold the file twice."""
    buf = bytearray(expected)
    view = memoryview(buf)
    done = 0
    while True:
        if done == len(buf):  # more than expected (a gzip size past 4 GiB wraps): grow
            more = f.read(_READ_CHUNK)
            if not more:
                break
            view.release()
            buf[done:] = more
            buf.extend(bytes(max(_READ_CHUNK, len(buf) // 4)))
            view = memoryview(buf)
            done += len(more)
            continue
        n = f.readinto(view[done:done + _READ_CHUNK])
        if not n:
            break
        done += n
        cancel.check()
        yield 400 * min(done, expected) // max(expected, 1), 1000
    view.release()
    del buf[done:]
    return buf


def _read_bytes(p: Path, cancel: CancelFlag) -> Job[bytearray]:
    if not p.is_file():
        raise TraceError(f"{p}: not a file")
    size = p.stat().st_size
    if size == 0:
        raise TraceError(f"{p}: file is empty")
    with open(p, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    raw_size = _uncompressed_size(p, size) if gz else size
    need = int(raw_size * _MEMORY_FACTOR)
    avail = _available_memory()
    if need > avail:
        raise TraceError(
            f"{p}: too large for the memory available: {raw_size / 2**20:,.0f} MiB of JSON "
            f"needs about {need / 2**20:,.0f} MiB, {avail / 2**20:,.0f} MiB are free")
    try:
        opener = gzip.open if gz else open
        with opener(p, "rb") as f:
            data = yield from _read_into(f, raw_size, cancel)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        why = "gzip stream is truncated (file cut short?)" if isinstance(exc, EOFError) \
            else f"not a valid gzip file ({exc})"
        raise TraceError(f"{p}: {why}") from None
    except OSError as exc:
        raise TraceError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if _first_char(data) is None:
        raise TraceError(f"{p}: file is empty")
    return data


# ----------------------------------------------------------------------------- splitting events

_NON_SPACE = re.compile(rb"\S")


def _first_char(data: bytearray) -> int | None:
    """Offset of the first non-whitespace byte (strip() would copy the whole file)."""
    m = _NON_SPACE.search(data)
    return m.start() if m else None


def _split_events(p: Path, data: bytes) -> tuple[list, dict]:
    """The event list as Raw slices (or dicts when the file needed the lenient parser) and the
    document's other fields."""
    start = _first_char(data) or 0
    head = bytes(data[start:start + 1])
    if head not in (b"{", b"["):
        raise TraceError(f"{p}: not JSON (starts with {bytes(data[start:start + 12])!r})")
    try:
        if head == b"[":
            return msgspec.json.decode(data, type=list[msgspec.Raw]), {}
        doc = msgspec.json.decode(data, type=_Document)
        if not doc.traceEvents and b'"traceEvents"' not in data[:1 << 20] \
                and b'"traceEvents"' not in data:
            raise TraceError(f"{p}: JSON is not a trace (no traceEvents list)")
        return doc.traceEvents, {"deviceProperties": doc.deviceProperties,
                                 "distributedInfo": doc.distributedInfo}
    except msgspec.ValidationError as exc:
        raise TraceError(f"{p}: JSON is not a trace ({exc})") from None
    except msgspec.DecodeError as exc:
        if "truncated" in str(exc):
            raise TraceError(f"{p}: JSON is truncated (file cut short?)") from None
        return _split_lenient(p, data, exc)


def _split_lenient(p: Path, data: bytes, first_error: Exception) -> tuple[list, dict]:
    """Python's json accepts NaN/Infinity, which some writers emit; msgspec refuses them."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        raise TraceError(f"{p}: not valid JSON ({first_error})") from None
    if isinstance(doc, list):
        return doc, {}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(f"{p}: JSON is not a trace (no traceEvents list)")
    info = doc.get("distributedInfo")
    props = doc.get("deviceProperties")
    return doc["traceEvents"], {"deviceProperties": props if isinstance(props, list) else [],
                                "distributedInfo": info if isinstance(info, dict) else None}


def _decode_batch(items: list, cols: _Columns, data: bytes) -> list:
    """One decode call per batch; per-event decoding only for a batch holding a bad event."""
    if items and isinstance(items[0], msgspec.Raw):
        try:
            return _batch_decoder.decode(_span_of(items, data))
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
    out = []
    for item in items:
        try:
            if isinstance(item, msgspec.Raw):
                ev = _event_decoder.decode(item)
            else:
                ev = msgspec.convert(item, _Event)
        except (msgspec.ValidationError, msgspec.DecodeError):
            ev = _decode_lax(item)
            if ev is None:
                cols.drop("malformed event")
                continue
        if ev.ph == "X":
            out.append(_Complete(ev.name, ev.cat, ev.pid, ev.tid, ev.ts, ev.dur, ev.args))
        elif ev.ph in ("i", "I"):
            out.append(_Instant(ev.name, ev.ts, ev.args))
    return out


def _span_of(items: list[msgspec.Raw], data: bytes) -> bytes:
    """The JSON array text of consecutive Raw slices of `data`: one slice of the original bytes
    from the first to the last (commas and whitespace included) instead of joining the pieces."""
    base = np.frombuffer(data, np.uint8).__array_interface__["data"][0]
    a = np.frombuffer(items[0], np.uint8).__array_interface__["data"][0] - base
    last = np.frombuffer(items[-1], np.uint8)
    b = last.__array_interface__["data"][0] - base + len(last)
    if not 0 <= a <= b <= len(data):  # not slices of `data` (cannot happen for bytes input)
        return b"[" + b",".join(items) + b"]"
    return b"[" + data[a:b] + b"]"


def _decode_lax(item) -> _Event | None:
    """Numbers written as strings are accepted; anything else not a valid event is dropped."""
    try:
        if isinstance(item, msgspec.Raw):
            return _event_decoder_lax.decode(item)
        return msgspec.convert(item, _Event, strict=False)
    except (msgspec.ValidationError, msgspec.DecodeError):
        if isinstance(item, msgspec.Raw):
            try:
                item = msgspec.json.decode(item)
            except msgspec.DecodeError:
                return None
        if not isinstance(item, dict):
            return None
        keep = {k: item[k] for k in ("ph", "name", "cat", "pid", "tid")
                if isinstance(item.get(k), (str, int))}
        keep.update({k: v for k in ("ts", "dur") if (v := _number(item.get(k))) is not None})
        try:
            return msgspec.convert(keep, _Event, strict=False)
        except msgspec.ValidationError:
            return None


def _number(value) -> float | None:
    """A ts/dur value as a float, or None when it is not a number (then counted as dropped)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


# ----------------------------------------------------------------------------- columns

_TS, _DUR, _CAT, _NAME = (attrgetter(f) for f in ("ts", "dur", "cat", "name"))
_PIDTID = attrgetter("pid", "tid")
_DEVICE, _STREAM = attrgetter("args.device"), attrgetter("args.stream")
_CORRELATION = attrgetter("args.correlation")


def _interner() -> defaultdict:
    """A dict giving each new key the next id, without leaving C (key -> len at insertion)."""
    d: defaultdict = defaultdict()
    d.default_factory = d.__len__
    return d

class _Columns:
    """Accumulates decoded batches as Python lists of scalars, then packs numpy arrays once."""

    def __init__(self) -> None:
        self.names: dict[str, int] = _interner()
        self.cats: dict[str, int] = _interner()
        self.tracks: dict[tuple, int] = _interner()
        self.x: dict[str, list] = {k: [] for k in ("ts", "dur", "cat", "name", "track", "dev",
                                                    "stream", "corr")}
        self.m: dict[str, list] = {k: [] for k in ("ts", "dtype", "did", "bytes", "alloc", "res")}
        self.dropped: dict[str, int] = {}

    def drop(self, why: str, n: int = 1) -> None:
        self.dropped[why] = self.dropped.get(why, 0) + n

    def add(self, events: list) -> None:
        """Pull columns out of one decoded batch with C-level maps, then drop the structs."""
        xs = [e for e in events if type(e) is _Complete]
        mems = [e for e in events if isinstance(e, _Instant) and e.name == "[memory]"]
        x, n = self.x, len(xs)
        for key, get in (("ts", _TS), ("dur", _DUR), ("dev", _DEVICE), ("stream", _STREAM),
                         ("corr", _CORRELATION)):
            x[key].append(_floats_of(xs, get))
        for key, get, ids in (("cat", _CAT, self.cats), ("name", _NAME, self.names),
                              ("track", _PIDTID, self.tracks)):
            x[key].append(np.fromiter(map(ids.__getitem__, map(get, xs)), np.int32, count=n))
        if mems:
            self._add_memory(mems)

    def _add_memory(self, events: list[_Instant]) -> None:
        m = self.m
        for e in events:
            a = e.args
            if a.nbytes is None:
                self.drop("[memory] event without Bytes")
                continue
            m["ts"].append(e.ts)
            m["dtype"].append(-1 if a.device_type is None else a.device_type)
            m["did"].append(-1 if a.device_id is None else a.device_id)
            m["bytes"].append(a.nbytes)
            m["alloc"].append(a.total_allocated)
            m["res"].append(a.total_reserved)

    def finish(self, path: Path) -> Trace:
        x = {k: np.concatenate(v) if v else np.zeros(0) for k, v in self.x.items()}
        start, dur = x["ts"], x["dur"]
        cat_table = np.array([category(c) for c in self.cats], dtype=np.int8)
        cat = cat_table[x["cat"]] if len(x["cat"]) else np.zeros(0, np.int8)
        name = x["name"].astype(np.int32)
        names = list(self.names)
        track, tracks, track_pid = self._canonical_tracks(x["track"].astype(np.int32))
        device = self._devices(x["dev"], cat, track, track_pid)
        stream = np.nan_to_num(x["stream"], nan=-1).clip(-1, 2**31 - 1).astype(np.int32)
        corr = np.nan_to_num(x["corr"], nan=-1, posinf=-1, neginf=-1)
        corr = corr.clip(-1, 2**62).astype(np.int64)

        # 2021 traces file annotations under `Operator`.
        annot = np.array([n.startswith(ANNOTATION_PREFIXES) for n in names], dtype=bool)
        if len(name):
            cat[(cat == Cat.CPU_OP) & annot[name]] = Cat.USER_ANNOTATION

        keep = self._valid(start, dur)
        keep &= self._first_of_duplicate_steps(start, dur, cat, name, track, names, keep)
        order = np.argsort(start[keep], kind="stable")
        sel = np.flatnonzero(keep)[order]
        return Trace(
            path=path, names=names, start=start[sel], end=start[sel] + dur[sel], dur=dur[sel],
            cat=cat[sel], name=name[sel], track=track[sel], device=device[sel],
            stream=stream[sel], corr=corr[sel], tracks=tracks, mem=self._memory(),
            dropped=self.dropped)

    def _valid(self, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
        missing = np.isnan(start) | np.isnan(dur)
        nonfinite = ~missing & ~(np.isfinite(start) & np.isfinite(dur))
        negative = ~missing & ~nonfinite & (dur < 0)
        for why, mask in (("missing or non-numeric ts/dur (or NaN)", missing),
                          ("infinite ts/dur", nonfinite), ("negative duration", negative)):
            if mask.any():
                self.drop(why, int(mask.sum()))
        return ~(missing | nonfinite | negative)

    def _first_of_duplicate_steps(self, start, dur, cat, name, track, names, keep) -> np.ndarray:
        """A ProfilerStep#N seen twice on the CPU keeps its first occurrence."""
        ok = np.ones(len(start), dtype=bool)
        step_ids = np.array([i for i, n in enumerate(names) if is_step_name(n)], np.int32)
        steps = np.flatnonzero(keep & np.isin(name, step_ids) & (cat != Cat.GPU_USER_ANNOTATION))
        if len(steps) == 0:
            return ok
        steps = steps[np.lexsort((start[steps], name[steps]))]
        dup = np.zeros(len(steps), dtype=bool)
        dup[1:] = name[steps][1:] == name[steps][:-1]
        if dup.any():
            ok[steps[dup]] = False
            self.drop("duplicate step", int(dup.sum()))
        return ok

    def _canonical_tracks(self, raw_track: np.ndarray):
        """pid/tid compare as strings: 2021 traces mix 25738 and "25738"."""
        canon: dict[tuple[str, str], int] = {}
        remap = np.array([canon.setdefault((str(p), str(t)), len(canon)) for p, t in self.tracks],
                         dtype=np.int32)
        pids = [p for p, _ in canon]
        track = remap[raw_track] if len(raw_track) else raw_track
        return track, list(canon), pids

    @staticmethod
    def _devices(raw: np.ndarray, cat: np.ndarray, track: np.ndarray, track_pid: list[str]):
        dev = np.nan_to_num(raw, nan=-1).astype(np.int64)
        gpu = np.isin(cat, np.array(GPU_CATS, dtype=np.int8))
        # A GPU event without args.device lives on the device its pid names.
        pid_dev = np.array([int(p) if p.isdigit() else -1 for p in track_pid], dtype=np.int64)
        missing = gpu & (dev < 0)
        if missing.any():
            dev[missing] = pid_dev[track[missing]]
        dev[~gpu] = -1
        return dev.astype(np.int32)

    def _memory(self) -> MemorySamples:
        m = self.m
        ts = _floats(m["ts"])
        nbytes = _floats(m["bytes"])
        ok = np.isfinite(ts) & np.isfinite(nbytes)
        if (~ok).any():
            self.drop("[memory] event with bad ts/Bytes", int((~ok).sum()))
        order = np.flatnonzero(ok)[np.argsort(ts[ok], kind="stable")]
        return MemorySamples(
            ts=ts[order], device_type=np.array(m["dtype"], dtype=np.int32)[order],
            device_id=np.array(m["did"], dtype=np.int32)[order], nbytes=nbytes[order],
            total_allocated=_floats(m["alloc"])[order], total_reserved=_floats(m["res"])[order])


def _floats_of(events: list, get) -> np.ndarray:
    """A float column of one batch; None (an absent value) becomes NaN."""
    try:
        return np.fromiter(map(get, events), dtype=np.float64, count=len(events))
    except TypeError:
        return np.array([get(e) for e in events], dtype=np.float64)


def _floats(values: list) -> np.ndarray:
    """float64 column; None (absent) becomes NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)




RANK_RE = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def _rank_of(p: Path, info) -> tuple[int | None, int | None]:
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        ws = info.get("world_size")
        return info["rank"], ws if isinstance(ws, int) else None
    m = RANK_RE.search(p.name)
    return (int(m.group(1)), None) if m else (None, None)
