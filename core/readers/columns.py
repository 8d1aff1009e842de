"""Typed events -> sorted numpy columns, the fields of a Trace.

Batches of decoded structs are pulled apart with C-level maps (no per-event Python statements)
into per-batch arrays; `finish` packs them once, sets each event's meaning (category, device)
and drops what no analysis can use, counting why.

An event's category, name and thread are interned together, as one (cat, name, pid, tid) key:
one map and one dict lookup an event instead of three (the keys are few: a trace repeats its
ops). `finish` splits the keys into the category, name and track ids, interning each part in
the order the keys were first seen, which is the order its values were first seen.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter

import numpy as np

from stallscope.core.kineto import (
    ACCELERATOR_RUNTIMES,
    ANNOTATION_PREFIXES,
    CATEGORY_CODES,
    DEVICE_WAIT_NAMES,
    GPU_CATS,
    KNOWN_OTHER_CATS,
    THREAD_NAME,
    Cat,
    category,
    is_step_name,
)
from stallscope.core.readers.trace_events import Complete, Instant, InstantGlobal, Metadata

# Times beyond 2**53 µs (285 years) are not exact in float64 and overflow the sums of analysis.
MAX_US = float(2**53)
MAX_BYTES = float(2**63)

_TS, _DUR = attrgetter("ts"), attrgetter("dur")
_KEY = attrgetter("cat", "name", "pid", "tid")
_DEVICE, _STREAM, _CORRELATION = (attrgetter(f) for f in ("device", "stream", "correlation"))
_ARGS = attrgetter("args")
_DEVICE_TYPE, _DEVICE_ID, _BYTES, _ALLOCATED, _RESERVED = (attrgetter(f) for f in (
    "device_type", "device_id", "nbytes", "total_allocated", "total_reserved"))


class _Kinds(dict):
    """Struct type -> 1 (complete), 2 (instant), 3 (metadata), 0 (a phase stallscope
    skips)."""

    def __missing__(self, kind) -> int:
        return 0


_KIND = _Kinds({Complete: 1, Instant: 2, InstantGlobal: 2, Metadata: 3})


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


def _interner() -> defaultdict:
    """A dict giving each new key the next id, without leaving C (key -> len at insertion)."""
    d: defaultdict = defaultdict()
    d.default_factory = d.__len__
    return d


class Columns:
    """Accumulates decoded batches as per-batch arrays, then packs numpy columns once."""

    def __init__(self) -> None:
        self.keys: dict[tuple, int] = _interner()  # (cat, name, pid, tid) -> key id
        # Filled by finish() from the keys, each in the order its values were first seen.
        self.names: dict[str, int] = {}
        self.cats: dict[str, int] = {}
        self.tracks: dict[tuple, int] = {}  # (pid, tid) as written -> raw track id
        self.x: dict[str, list] = {k: [] for k in ("ts", "dur", "key", "dev", "stream", "corr")}
        self.m: dict[str, list] = {k: [] for k in ("ts", "dtype", "did", "bytes", "alloc", "res")}
        self.dropped: dict[str, int] = {}
        self.thread_names: dict[tuple[str, str], str] = {}  # (pid, tid) as strings -> name

    def drop(self, why: str, n: int = 1) -> None:
        self.dropped[why] = self.dropped.get(why, 0) + n

    def add(self, events: list) -> None:
        """Pull columns out of one decoded batch with C-level maps; the structs go with it."""
        kinds = np.fromiter(map(_KIND.__getitem__, map(type, events)), np.int8, count=len(events))
        xs = list(compress(events, kinds == 1))
        x, n = self.x, len(xs)
        args = list(map(_ARGS, xs))
        for key, items, get in (("ts", xs, _TS), ("dur", xs, _DUR), ("dev", args, _DEVICE),
                                ("stream", args, _STREAM), ("corr", args, _CORRELATION)):
            x[key].append(_floats_of(items, get))
        del args
        x["key"].append(np.fromiter(map(self.keys.__getitem__, map(_KEY, xs)), np.int32, count=n))
        for meta in map(events.__getitem__, np.flatnonzero(kinds == 3)):
            if meta.name == THREAD_NAME and isinstance(meta.args.name, str):
                # Kineto writes a thread's name twice ("thread 639 (python3)", then
                # "thread 639 (pt_autograd_0)"): the last one is what the thread became
                self.thread_names[(str(meta.pid), str(meta.tid))] = meta.args.name[:200]
        instants = np.flatnonzero(kinds == 2)
        if len(instants):
            mems = [e for e in map(events.__getitem__, instants) if e.name == "[memory]"]
            if mems:
                self._add_memory(mems)

    def _add_memory(self, events: list[Instant]) -> None:
        args = list(map(_ARGS, events))
        self.m["ts"].append(_floats_of(events, _TS))
        for key, get in (("dtype", _DEVICE_TYPE), ("did", _DEVICE_ID), ("bytes", _BYTES),
                         ("alloc", _ALLOCATED), ("res", _RESERVED)):
            self.m[key].append(_floats_of(args, get))

    # ------------------------------------------------------------------------- packing

    def finish(self, device_properties: list[dict] | None = None) -> dict:
        """The Trace's fields (all but path and metadata), sorted by start."""
        x = {k: np.concatenate(v) if v else np.zeros(0) for k, v in self.x.items()}
        key = x.pop("key").astype(np.int32, copy=False)
        for part, ids in (("cat", self.cats), ("name", self.names), ("track", self.tracks)):
            x[part] = self._part_of_keys(key, part, ids)
        start, dur = x["ts"], x["dur"]
        cat_table = np.array([category(c) for c in self.cats], dtype=np.int8)
        cat = cat_table[x["cat"]] if len(x["cat"]) else np.zeros(0, np.int8)
        name = x["name"]
        names = list(self.names)
        track, tracks, track_pid = self._canonical_tracks(x["track"])
        stream = _ints(x["stream"], np.int32)
        corr = _ints(x["corr"], np.int64)

        # 2021 traces file annotations under `Operator`; an accelerator's waits are no work.
        annot = np.array([n.startswith(ANNOTATION_PREFIXES) for n in names], dtype=bool)
        waits = np.array([n in DEVICE_WAIT_NAMES for n in names], dtype=bool)
        if len(name):
            cat[(cat == Cat.CPU_OP) & annot[name]] = Cat.USER_ANNOTATION
            cat[(cat == Cat.ACCELERATOR) & waits[name]] = Cat.OTHER
        device = self._devices(x["dev"], cat, track, track_pid)

        keep = self._valid(start, dur)
        keep &= self._first_of_duplicate_steps(start, cat, name, names, keep)
        sel = np.flatnonzero(keep)
        sel = sel[np.argsort(start[sel], kind="stable")]
        start, dur = start[sel], dur[sel]
        return dict(
            names=names, start=start, end=start + dur, dur=dur, cat=cat[sel], name=name[sel],
            track=track[sel], device=device[sel], stream=stream[sel], corr=corr[sel],
            tracks=tracks, mem=self._memory(), dropped=self.dropped,
            thread_names={k: v for k, v in self.thread_names.items() if k in set(tracks)},
            unanalysed_accelerator=self._unanalysed(x["cat"], cat, device_properties or []))

    def _part_of_keys(self, key: np.ndarray, part: str, ids: dict) -> np.ndarray:
        """The per-event ids of one part of the keys ("cat", "name" or "track"), interned into
        `ids` in the order of the keys (the order of first appearance)."""
        ids.clear()
        if part == "track":
            values = [(k[2], k[3]) for k in self.keys]
        else:
            values = [k[0 if part == "cat" else 1] for k in self.keys]
        table = np.array([ids.setdefault(v, len(ids)) for v in values], dtype=np.int32)
        return table[key] if len(key) else np.zeros(0, np.int32)

    def _valid(self, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
        missing = np.isnan(start) | np.isnan(dur)
        infinite = np.isinf(start) | np.isinf(dur)
        far = ~missing & ~infinite & ((np.abs(start) > MAX_US) | (np.abs(dur) > MAX_US))
        negative = ~missing & ~infinite & (dur < 0)
        for why, mask in (("missing or non-numeric ts/dur (or NaN)", missing),
                          ("infinite ts/dur", infinite),
                          ("ts/dur beyond 2^53 µs (not a time)", far),
                          ("negative duration", negative & ~far)):
            if mask.any():
                self.drop(why, int(mask.sum()))
        return ~(missing | infinite | far | negative)

    def _first_of_duplicate_steps(self, start, cat, name, names, keep) -> np.ndarray:
        """A ProfilerStep#N seen twice on the CPU keeps its first occurrence."""
        ok = np.ones(len(start), dtype=bool)
        step_ids = np.array([i for i, n in enumerate(names) if is_step_name(n)], np.int32)
        steps = np.flatnonzero(keep & in_ids(name, step_ids, len(names))
                                & (cat != Cat.GPU_USER_ANNOTATION))
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
        dev = _ints(raw, np.int32)
        gpu = in_codes(cat, GPU_CATS)
        # A GPU event without args.device lives on the device its pid names.
        pid_dev = np.array([int(p) if p.isdigit() and len(p) < 10 else -1 for p in track_pid],
                           dtype=np.int32)
        missing = gpu & (dev < 0)
        if missing.any():
            dev[missing] = pid_dev[track[missing]]
        dev[~gpu] = -1
        return dev

    def _memory(self) -> MemorySamples:
        m = {k: np.concatenate(v) if v else np.zeros(0) for k, v in self.m.items()}
        ts, nbytes = m["ts"], m["bytes"]
        absent = np.isnan(nbytes)
        if absent.any():
            self.drop("[memory] event without Bytes", int(absent.sum()))
        ok = ~absent & np.isfinite(ts) & np.isfinite(nbytes) & (np.abs(ts) <= MAX_US) \
            & (np.abs(nbytes) <= MAX_BYTES)
        if bad := int((~ok & ~absent).sum()):
            self.drop("[memory] event with bad ts/Bytes", bad)
        order = np.flatnonzero(ok)[np.argsort(ts[ok], kind="stable")]
        for key in ("alloc", "res"):
            m[key][~(np.abs(m[key]) <= MAX_BYTES)] = np.nan
        return MemorySamples(
            ts=ts[order], device_type=_ints(m["dtype"], np.int32)[order],
            device_id=_ints(m["did"], np.int32)[order], nbytes=nbytes[order],
            total_allocated=m["alloc"][order], total_reserved=m["res"][order])

    def _unanalysed(self, raw_cat: np.ndarray, cat: np.ndarray, props: list[dict]) -> str | None:
        """With no device activity stallscope reads: the accelerator the trace came from, when
        its runtime's launches or device categories stallscope does not know are there."""
        if in_codes(cat, GPU_CATS).any():
            return None
        counts = (np.bincount(raw_cat, minlength=len(self.cats)) if len(raw_cat)
                  else np.zeros(0, dtype=np.int64))
        seen = [c for c, n in zip(self.cats, counts, strict=False) if n]
        runtimes = sorted({ACCELERATOR_RUNTIMES[c] for c in seen if c in ACCELERATOR_RUNTIMES})
        unknown = sorted(c for c in seen if c not in CATEGORY_CODES and c not in KNOWN_OTHER_CATS)
        if not runtimes and not unknown:
            return None
        devices = sorted({str(d["name"]) for d in props if d.get("name")})
        label = ", ".join(devices or runtimes or unknown)
        return label + (f" (categories {', '.join(unknown)})" if unknown and devices else "")


# why an event was dropped (Columns.drop's words), as more than one
_DROPPED_PLURALS = {"malformed event": "malformed events", "negative duration":
                    "negative durations", "duplicate step": "duplicate steps",
                    "[memory] event without Bytes": "[memory] events without Bytes",
                    "[memory] event with bad ts/Bytes": "[memory] events with bad ts/Bytes"}


def dropped_text(dropped: dict[str, int], sep: str = ", ") -> str:
    """'3 malformed events, 1 negative duration': how many events were dropped, and why."""
    return sep.join(f"{n:,} {why if n == 1 else _DROPPED_PLURALS.get(why, why)}"
                    for why, n in dropped.items())


def in_codes(values: np.ndarray, codes) -> np.ndarray:
    """np.isin(values, codes) for a column of a few small codes (the int8 categories), by one
    comparison a code: np.isin takes ~50x as long on int8 (12 ms for 1.6M events)."""
    out = np.zeros(values.shape, dtype=bool)
    for code in sorted({int(c) for c in codes}):
        out |= values == code
    return out


def in_ids(values: np.ndarray, ids, n: int) -> np.ndarray:
    """np.isin(values, ids) for an id column whose values are all in range(n) (names): a table
    of n booleans looked up per event, ~2.5x as fast as np.isin."""
    table = np.zeros(n, dtype=bool)
    table[np.asarray(ids, dtype=np.int64)] = True
    return table[values]


def _floats_of(events: list, get) -> np.ndarray:
    """A float column of one batch; None (an absent value) becomes NaN."""
    try:
        return np.fromiter(map(get, events), dtype=np.float64, count=len(events))
    except (TypeError, ValueError, OverflowError):
        return _floats([get(e) for e in events])


def _floats(values: list) -> np.ndarray:
    """float64 column; None (absent) becomes NaN, and so does an int too large for a float."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return np.array([_float(v) for v in values], dtype=np.float64)


def _float(v) -> float:
    try:
        if isinstance(v, str):
            return float(int(v, 0))  # ids written as text: "0x0", "7"
        return np.nan if v is None else float(v)
    except (TypeError, ValueError, OverflowError):
        return np.nan


def _ints(values: np.ndarray, dtype) -> np.ndarray:
    """An id column (device, stream, correlation): -1 where absent or out of the type's range."""
    ok = (values >= 0) & (values < 2.0 ** (8 * np.dtype(dtype).itemsize - 1))  # NaN: False
    return np.where(ok, values, -1).astype(dtype)
