"""Files stallscope did not write in this process (a session from another machine, a probe's
answer, tune.json, LMDB metadata) read through one bounded decoder, and any string from them
shown as what it is.

    run = read_json(path, "run.json")        # regular file, capped, depth-limited; one line
    events, bad = json_lines(data)           # events*.jsonl: huge ints and NaN left out
    count(v) / finite(v)                     # a checked number, or None (the field left out)
    visible("\\u202egnp.exe")                  -> '\\\\u202egnp.exe' (every hidden character shown)

A bad file raises StallscopeError with one line naming it; a bad field is left out (None) so the
rest of the report stands.
"""

from __future__ import annotations

import json
import math
import os
import re

from stallscope.core.errors import StallscopeError
from stallscope.core.files import Refused, read_regular
from stallscope.core.units import mib

MiB = 1 << 20
# The most stallscope reads of each kind: far above what it writes (run.json is a few kB).
CAPS = {"run.json": 16 * MiB, "events": 512 * MiB, "record.bin": 512 * MiB, "tune.json": 16 * MiB,
        "probe answer": 1 * MiB, "line stats": 64 * MiB, "LMDB metadata": 64 * MiB}
MAX_DEPTH = 64       # nesting of a JSON document stallscope wrote itself is under 10
MAX_COUNT = 1 << 40  # a count (workers, batches, steps, bytes) above this is not one
MAX_LINE = 1 * MiB   # one events.jsonl line (the runner caps what it writes far below this)

# Integers past 19 digits, NaN / Infinity and exponents past 300: what json.loads turns into
# numbers no float column can hold. Only lines holding one are decoded the slow way.
_ODD_NUMBER = re.compile(rb"\d{19,}|NaN|Infinity|\d[eE][+-]?\d{3,}")


def read_bytes(path: str | os.PathLike, kind: str, cap: int | None = None) -> bytes:
    """The bytes of a regular file of at most CAPS[kind]; one-line StallscopeError else."""
    try:
        return read_regular(path, cap or CAPS[kind])
    except Refused as exc:
        raise StallscopeError(f"{_where(path, kind)}: {exc}") from None


def read_json(path: str | os.PathLike, kind: str, cap: int | None = None):
    """A JSON document from a file: read_bytes, then loads."""
    return loads(read_bytes(path, kind, cap), _where(path, kind))


def _where(path: str | os.PathLike, kind: str) -> str:
    """'<path>' when its name says what it is (run.json), else '<path>: <kind>'."""
    return str(path) if os.path.basename(path) == kind else f"{path}: {kind}"


def loads(data: bytes | str, where: str, max_depth: int = MAX_DEPTH, cap: int | None = None):
    """JSON from bytes no one vouches for: more than `cap` bytes refused (a value that is not in
    a file of its own, e.g. in an LMDB), undecodable bytes replaced, numbers no float can hold
    left as None, nesting past `max_depth` refused. StallscopeError: `where` + what is wrong."""
    if cap is not None and len(data) > cap:
        raise StallscopeError(f"{where}: {mib(len(data))}, larger than the {mib(cap)} read of "
                              "such a value")
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    try:
        value = _decode(data)
    except RecursionError:
        raise StallscopeError(f"{where} is nested too deep to be one") from None
    except ValueError as exc:
        raise StallscopeError(f"{where} is not JSON ({str(exc)[:120]})") from None
    if depth(value, max_depth) > max_depth:
        raise StallscopeError(f"{where} is nested more than {max_depth} levels deep")
    return value


def json_lines(data: bytes) -> tuple[list, int]:
    """Each complete line of JSON-lines bytes decoded: (values, lines that were not JSON or
    were longer than MAX_LINE). Numbers no float can hold come back as None."""
    values, bad = [], 0
    odd = _ODD_NUMBER.search(data) is not None
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        if len(line) > MAX_LINE:
            bad += 1
            continue
        try:
            text = line.decode("utf-8", errors="replace")
            values.append(_decode(text) if odd else json.loads(text))
        except (ValueError, RecursionError):
            bad += 1
    return values, bad


def _decode(text: str):
    return json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_none)


def _int(s: str) -> int | None:
    return int(s) if len(s) <= 19 else None


def _float(s: str) -> float | None:
    v = float(s)
    return v if math.isfinite(v) else None


def _none(_s: str) -> None:
    return None


def depth(value, limit: int = MAX_DEPTH) -> int:
    """How deep lists and dicts nest in `value` (stops counting past `limit`)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if not isinstance(v, list):
            continue
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        stack.extend((x, d + 1) for x in v if isinstance(x, list | dict))
    return deepest


def count(v, cap: int = MAX_COUNT) -> int | None:
    """v when it is a non-negative int (not a bool) up to cap, else None."""
    ok = isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= cap
    return v if ok else None


def finite(v) -> float | None:
    """v as a float when it is a finite number (not a bool), else None."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


# C0 controls, DEL, C1 controls, zero-width characters, the bidirectional marks, embeddings,
# overrides and isolates, line/paragraph separators, invisible operators and fillers, the BOM,
# the interlinear annotation marks, and tag characters (text hidden in plain sight). Emoji
# variation selectors pass: they only pick how the character before them is drawn.
_HIDDEN = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
           "\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufeff\uffa0"
           "\ufff9-\ufffb\U000e0000-\U000e0fff")
_UNSAFE = re.compile(f"[{_HIDDEN}]")
_UNSAFE_OR_LINES = re.compile(f"[{_HIDDEN}\t\n]")


def _code(m: re.Match) -> str:
    c = ord(m.group())
    if c == 0x0A:
        return "\\n"
    if c == 0x09:
        return "\\t"
    if c < 0x100:
        return f"\\x{c:02x}"
    return f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def visible(text: str, *, lines: bool = False) -> str:
    """`text` with every control, invisible or direction-changing character written as an
    escape (\\x1b, \\u202e, \\u200b), newlines and tabs as \\n and \\t: what a name or an argument
    from a file holds, shown as what it is. lines=True keeps newlines and tabs (the terminal's
    own output)."""
    text = str(text)
    return (_UNSAFE if lines else _UNSAFE_OR_LINES).sub(_code, text)
