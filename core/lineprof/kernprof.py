"""kernprof `.lprof` files: a pickle of line_profiler's LineStats, read only when trusted.

    profiles = load_lprof(path, trust_pickle=True)   # one Profile per function, heaviest first

The source is taken from the files as they are now (with a warning when a file is newer than
the stats). Even with the caller's go-ahead, the unpickler builds nothing but LineStats.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path

from stallscope.core.files import Refused, read_regular
from stallscope.core.lineprof.source import block_end, mtime, read_source
from stallscope.core.lineprof.stats import JSON_CAP, Line, LineprofError, Profile


class _PickledLineStats:
    """Stand-in for line_profiler's LineStats: pickle fills in `timings` and `unit`."""

    def __init__(self, *args) -> None:
        if len(args) == 2:
            self.timings, self.unit = args

    def __setstate__(self, state) -> None:
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            state = state[1]  # (None, slots) form
        if isinstance(state, dict):
            self.__dict__.update(state)


class _LprofUnpickler(pickle.Unpickler):
    """Even with the user's go-ahead, build only what a LineStats file holds."""

    def find_class(self, module: str, name: str):
        if name == "LineStats" and module.split(".")[0] == "line_profiler":
            return _PickledLineStats
        if (module, name) == ("copyreg", "_reconstructor"):
            import copyreg

            return copyreg._reconstructor  # type: ignore[attr-defined]  # not in typeshed
        if (module, name) in (("builtins", "object"), ("__builtin__", "object")):
            return object
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def load_lprof(path: str | os.PathLike, *, trust_pickle: bool = False) -> list[Profile]:
    """Read a kernprof `.lprof` file: one Profile per function, source taken from the current
    files (with a warning when a file is newer than the stats). A `.lprof` is a pickle: the
    caller must confirm with trust_pickle=True (the CLI's --trust-pickle, a dialog in the app)."""
    path = Path(path)
    if not trust_pickle:
        raise LineprofError(
            f"{path}: a .lprof file is a Python pickle, which can run code when loaded; "
            "open it only if you made it yourself (CLI: --trust-pickle)")
    try:
        data = read_regular(path, JSON_CAP)
    except Refused as exc:
        raise LineprofError(f"{path}: {exc}") from None
    try:
        stats = _LprofUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad file
        raise LineprofError(f"{path}: not a kernprof .lprof file ({exc})") from None
    timings = getattr(stats, "timings", None)
    unit = getattr(stats, "unit", None)
    if not isinstance(timings, dict) or not isinstance(unit, (int, float)):
        raise LineprofError(f"{path}: not a kernprof .lprof file (no timings/unit)")
    try:
        stats_mtime = path.stat().st_mtime
    except OSError:
        stats_mtime = None
    profiles = []
    for key, entries in timings.items():
        try:
            file, first, name = key
            rows = [(int(a), int(b), float(c)) for a, b, c in entries]
        except (TypeError, ValueError):
            raise LineprofError(f"{path}: malformed timings entry {key!r}") from None
        profiles.append(_profile_from_timings(str(file), int(first), str(name), rows,
                                              float(unit), stats_mtime, str(path)))
    profiles.sort(key=lambda p: -p.total_s)
    return profiles


def _profile_from_timings(file: str, first: int, name: str, rows, unit: float,
                          stats_mtime: float | None, origin: str) -> Profile:
    warnings = []
    src = read_source(file)
    if src is None:
        warnings.append(f"{file}: source not found; showing line numbers without code")
        src = []
    elif stats_mtime is not None and mtime(file) > stats_mtime:
        warnings.append(f"{file} changed after these stats were written; "
                        "the code shown may not match the timings")
    timed = {lineno: (hits, t * unit) for lineno, hits, t in rows}
    last = max([first, *timed])
    if src:
        last = max(last, block_end(src, first))
    lines = []
    for lineno in range(first, last + 1):
        hits, t = timed.get(lineno, (0, 0.0))
        text = src[lineno - 1].rstrip("\r\n") if 0 < lineno <= len(src) else ""
        lines.append(Line(lineno, hits, t, text))
    # kernprof has no call count: the hits of the first executed line are the closest thing.
    samples = next((h for ln, (h, _t) in sorted(timed.items()) if h), 0)
    return Profile(name.rsplit(".", 1)[-1], name, file, first, lines, unit_s=unit,
                   samples=samples, workers=0, warnings=warnings, path=origin)


def looks_like_pickle(path: str | os.PathLike) -> bool:
    """A pickle starts with the PROTO opcode (0x80): how a renamed .lprof is still recognised."""
    try:
        with open(path, "rb") as fh:
            return fh.read(1) == b"\x80"
    except OSError:
        return False
