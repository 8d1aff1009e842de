"""Chrome-trace JSON (torch.profiler / Kineto): `{"traceEvents": [...], ...}` or a bare array.

Fast path: the event array is cut into ~16 MB pieces at `},{` and each piece is decoded by msgspec
straight into typed structs (a tagged union on `ph`: flows, metadata and counters decode to empty
structs). A cut inside a string or a nested object cannot decode (the piece would end inside that
string or object), so a piece that fails to parse moves the cut to the next candidate. The text
before the array and after it decode on their own, for the metadata. No pass over the file
happens twice, and no per-event object lives longer than its piece.

Slow path, for anything the fast path did not take whole: msgspec splits the array into Raw slices
(or Python's json reads NaN/Infinity), batches that fail the typed decode go event by event, and
events that still fail are dropped and counted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import msgspec

from stallscope.core.errors import TraceError
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.readers.columns import Columns
from stallscope.core.readers.source import first_non_blank
from stallscope.core.readers.trace_events import (
    AnyPhase,
    Complete,
    Instant,
    InstantGlobal,
    Metadata,
    by_phase,
)
from stallscope.core.units import plural

KIND = "JSON"


def accepts(head: bytes) -> bool:
    return head[:1] in (b"{", b"[")


# ----------------------------------------------------------------------------- structs

_SKIPPED_PHASES = "BEbnestfSTFpPONDRcCVv()"
_Skipped = tuple(msgspec.defstruct(f"_Skip{ord(c)}", [], gc=False, tag_field="ph", tag=c)
                 for c in _SKIPPED_PHASES)
_Tagged = Complete | Instant | InstantGlobal | Metadata
for _skip in _Skipped:
    _Tagged = _Tagged | _skip  # type: ignore[misc]  # phases made at run time; typed as above


_ABSENT = msgspec.Raw(b"")


class _Meta(msgspec.Struct):
    """The document's fields other than the events, kept as raw JSON until read leniently."""

    deviceProperties: msgspec.Raw = _ABSENT  # empty when the key is absent
    distributedInfo: msgspec.Raw = _ABSENT


class _Tail(_Meta):
    traceEvents: list[_Tagged] = []


class _TailRaw(_Meta):
    traceEvents: list[msgspec.Raw] = []


class _Document(_Meta):
    traceEvents: list[msgspec.Raw] = []


_pieces = msgspec.json.Decoder(list[_Tagged])
_one = msgspec.json.Decoder(_Tagged)
_raws = msgspec.json.Decoder(list[msgspec.Raw])
_meta = msgspec.json.Decoder(_Meta)
_tail = msgspec.json.Decoder(_Tail)
_tail_raw = msgspec.json.Decoder(_TailRaw)
_document = msgspec.json.Decoder(_Document)
_event = msgspec.json.Decoder(AnyPhase)
_event_lax = msgspec.json.Decoder(AnyPhase, strict=False)

_PIECE = 16 << 20  # bytes of events decoded at a time
_MAX_MISCUTS = 32  # cuts that fell inside a string or object before the slow path takes over
_CUT = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')
_DEPTH_HINT = "about 1,000"  # msgspec follows Python's recursion limit


@dataclass
class Decoded:
    cols: Columns
    device_properties: list[dict] = field(default_factory=list)
    distributed_info: dict | None = None
    notes: list[str] = field(default_factory=list)


def decode(p, data: bytearray, cancel: CancelFlag) -> Job[Decoded]:
    """Yields (400..1000, 1000) by bytes decoded."""
    start = first_non_blank(data)
    if start is None:
        raise TraceError(f"{p}: file is empty")
    try:
        out = yield from _fast(p, data, start, cancel)
        if out is None:
            out = yield from _slow(p, data, start, cancel)
    except RecursionError:
        raise TraceError(f"{p}: JSON nested deeper than {_DEPTH_HINT} levels (a trace's events "
                         "are a few levels deep)") from None
    return out


# ----------------------------------------------------------------------------- fast path

def _fast(p, data: bytearray, start: int, cancel: CancelFlag) -> Job[Decoded | None]:
    cols = Columns()
    is_doc = data[start] == ord("{")
    meta: list[_Meta] = []
    if is_doc:
        m = _EVENTS_KEY.search(data, start)
        if m is None:
            return None
        pos = m.end()
        try:
            meta.append(_meta.decode(bytes(data[start:pos]) + b"]}"))
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None  # the key was not the document's own
    else:
        pos = start + 1
    size = len(data)
    miscuts = 0
    look_from = pos + _PIECE
    while size - pos > 2 * _PIECE:
        cancel.check()
        cut = _CUT.search(data, look_from)
        if cut is None:
            break
        events = _piece_in_place(cols, data, pos - 1, cut.start() + 1)
        if events is _MISCUT:
            miscuts += 1
            if miscuts > _MAX_MISCUTS:
                return None
            look_from = cut.start() + 1
            continue
        if events is None:
            return None
        cols.add(events)
        pos = cut.end() - 1
        look_from = pos + _PIECE
        yield 400 + 600 * pos // size, 1000
    rest = bytes(data[pos:])
    if is_doc:
        text = b'{"traceEvents":[' + rest
        tail: _Tail | _TailRaw
        try:
            tail = _tail.decode(text)
            cols.add(tail.traceEvents)
        except msgspec.ValidationError:
            try:
                tail = _tail_raw.decode(text)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return None
            cols.add(_each(tail.traceEvents, cols))
        except msgspec.DecodeError:
            return None
        meta.append(tail)
    else:
        events = _piece(cols, b"[" + rest)
        if events is None or events is _MISCUT:
            return None
        cols.add(events)
    return _with_metadata(cols, meta)


_MISCUT: list = []  # sentinel: the piece ends inside a string or an object
_AT_BYTE = re.compile(r"\(byte (\d+)\)")


def _piece_in_place(cols: Columns, data: bytearray, lo: int, hi: int) -> list | None:
    """_piece of data[lo:hi + 1] without copying it: the byte before the first event (`[`, `,`
    or a blank) and the one after the last (`,` or a blank) become `[` and `]` meanwhile."""
    saved = data[lo], data[hi]
    data[lo], data[hi] = 0x5B, 0x5D
    try:
        with memoryview(data) as view:
            return _piece(cols, view[lo:hi + 1])
    finally:
        data[lo], data[hi] = saved


def _piece(cols: Columns, text) -> list | None:
    """The events of one piece `[...]`. _MISCUT when the text ends inside a string or object (a
    cut in the wrong place), None when it is malformed before its end (the slow path will say
    how). A piece holding an event that fails the types goes event by event."""
    try:
        return _pieces.decode(text)
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass
    try:  # Raw slices check the syntax only (not the types, nor UTF-8 in strings)
        items = _raws.decode(text)
    except msgspec.DecodeError as exc:
        return _MISCUT if _at_end(exc, len(text)) else None
    return _each(items, cols)


def _at_end(exc: Exception, n: int) -> bool:
    """Did the parser fail at the piece's last byte (or run out of input)?"""
    msg = str(exc)
    if "truncated" in msg:
        return True
    m = _AT_BYTE.search(msg)
    return m is None or int(m.group(1)) >= n - 1


# ----------------------------------------------------------------------------- slow path

def _slow(p, data: bytearray, start: int, cancel: CancelFlag) -> Job[Decoded]:
    cols = Columns()
    items, meta = _split(p, data, start)
    total = max(len(items), 1)
    step = 65536
    for lo in range(0, len(items), step):
        cancel.check()
        batch = items[lo:lo + step]
        if batch and isinstance(batch[0], msgspec.Raw):
            events = _piece(cols, b"[" + b",".join(batch) + b"]")
            if events is None or events is _MISCUT:  # cannot happen: each slice is valid JSON
                events = _each(batch, cols)
            cols.add(events)
        else:
            cols.add(_each(batch, cols))
        yield 400 + 600 * min(lo + step, total) // total, 1000
    return _with_metadata(cols, meta)


def _split(p, data: bytearray, start: int) -> tuple[list, list]:
    """The events as Raw slices (or Python objects from the lenient parser), and the metadata."""
    try:
        if data[start] == ord("["):
            return _raws.decode(data), []
        doc = _document.decode(data)
    except msgspec.ValidationError as exc:
        raise TraceError(f"{p}: JSON is not a trace ({_message(exc)})") from None
    except msgspec.DecodeError as exc:
        if "truncated" in str(exc):
            raise TraceError(f"{p}: JSON is truncated (file cut short?)") from None
        return _split_lenient(p, data, exc)
    if not doc.traceEvents and b'"traceEvents"' not in data:
        raise TraceError(f"{p}: JSON is not a trace (no traceEvents list)")
    return doc.traceEvents, [doc]


def _split_lenient(p, data: bytearray, first_error: Exception) -> tuple[list, list]:
    """Python's json accepts NaN/Infinity, which some writers emit; msgspec refuses them."""
    try:
        doc = json.loads(data)
    except ValueError:
        raise TraceError(f"{p}: not valid JSON ({_message(first_error)})") from None
    if isinstance(doc, list):
        return doc, []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(f"{p}: JSON is not a trace (no traceEvents list)")
    meta = _Meta(*(msgspec.Raw(msgspec.json.encode(doc[k])) if k in doc else _ABSENT
                   for k in ("deviceProperties", "distributedInfo")))
    return doc["traceEvents"], [meta]


def _message(exc: Exception) -> str:
    return str(exc).replace("\n", " ")


# ----------------------------------------------------------------------------- event by event

def _each(items: list, cols: Columns) -> list:
    """Per-event decoding for a batch holding a bad event: each event as the batch decoder reads
    it, else leniently; what still fails is dropped. An event's fate never depends on the events
    beside it, so pieces of any size read the same."""
    out = []
    for item in items:
        try:
            if isinstance(item, msgspec.Raw):
                tagged = _one.decode(item)
            else:
                tagged = msgspec.convert(item, _Tagged)
            if isinstance(tagged, (Complete, Instant)):
                out.append(tagged)
            continue
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
        try:
            if isinstance(item, msgspec.Raw):
                ev = _event.decode(item)
            else:
                ev = msgspec.convert(item, AnyPhase)
        except (msgspec.ValidationError, msgspec.DecodeError):
            lax = _lax(item)
            if lax is None:
                cols.drop("malformed event")
                continue
            ev = lax
        picked = by_phase(ev)
        if picked is not None:
            out.append(picked)
    return out


def _lax(item) -> AnyPhase | None:
    """Numbers written as strings are accepted; anything else not a valid event is dropped."""
    try:
        if isinstance(item, msgspec.Raw):
            return _event_lax.decode(item)
        return msgspec.convert(item, AnyPhase, strict=False)
    except (msgspec.ValidationError, msgspec.DecodeError):
        if isinstance(item, msgspec.Raw):
            try:
                item = msgspec.json.decode(item)
            except msgspec.DecodeError:
                return None
        if not isinstance(item, dict):
            return None
        keep = {k: item[k] for k in ("ph", "name", "cat", "pid", "tid")
                if isinstance(item.get(k), (str, int)) and not isinstance(item.get(k), bool)}
        keep.update({k: v for k in ("ts", "dur") if (v := _number(item.get(k))) is not None})
        try:
            return msgspec.convert(keep, AnyPhase, strict=False)
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


# ----------------------------------------------------------------------------- metadata

def _with_metadata(cols: Columns, metas: list[_Meta]) -> Decoded:
    """deviceProperties must be a list of objects and distributedInfo an object; anything else
    is left out with a note, and the events still load."""
    out = Decoded(cols)
    props = info = _ABSENT
    for m in metas:  # the last one written wins, as in a JSON object
        props = m.deviceProperties if len(m.deviceProperties) else props
        info = m.distributedInfo if len(m.distributedInfo) else info
    value = _value(props)
    if isinstance(value, list):
        out.device_properties = [d for d in value if isinstance(d, dict)]
        if bad := len(value) - len(out.device_properties):
            out.notes.append(f"{plural(bad, 'deviceProperties entry', 'deviceProperties entries')}"
                             " ignored (not an object)")
    elif value is not None:
        out.notes.append(f"deviceProperties ignored ({_what(value)}, not a list)")
    value = _value(info)
    if isinstance(value, dict):
        out.distributed_info = value
    elif value is not None:
        out.notes.append(f"distributedInfo ignored ({_what(value)}, not an object)")
    return out


_INVALID = object()  # a metadata value that is not valid JSON text (skipped, never parsed)


def _value(raw: msgspec.Raw):
    """The Python value of a metadata field (None when absent; JSON null is None too)."""
    if not len(raw):
        return None
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:  # e.g. bytes that are not UTF-8 inside a string
        return _INVALID


def _what(value) -> str:
    if value is _INVALID:
        return "not valid UTF-8 JSON"
    for kind, name in ((bool, "boolean"), (str, "string"), ((int, float), "number"),
                       (list, "array"), (dict, "object")):
        if isinstance(value, kind):
            return f"a JSON {name}"
    return type(value).__name__
