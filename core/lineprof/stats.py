"""Line stats of one profiled function: the model (Line, Profile) and its JSON file.

A session's `lineprof/<Class.method>.json` holds one profiled function (written by
core/capture/lineprof_capture.py in the user's interpreter):

    {"version": 1, "function", "qualname", "file", "first_line", "unit_s", "total_s",
     "samples", "workers", "lines": [{"lineno", "hits", "total_s", "source"}], "warnings": [...]}

`samples` is the number of calls; `total_s` the sum of the lines' time.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stallscope.core.capture.lineprof_capture import FORMAT_VERSION  # the writer's, one number
from stallscope.core.errors import StallscopeError
from stallscope.core.files import Refused, read_regular

if TYPE_CHECKING:
    from stallscope.core.lineprof.source import SourceMatch

JSON_CAP = 16 << 20     # a line-stats file holds one function's lines: kilobytes


class LineprofError(StallscopeError):
    """A line-stats file that cannot be read."""


@dataclass
class Line:
    lineno: int
    hits: int
    total_s: float
    source: str

    @property
    def per_hit_s(self) -> float:
        return self.total_s / self.hits if self.hits else 0.0


@dataclass
class Profile:
    function: str
    qualname: str
    file: str
    first_line: int
    lines: list[Line]
    unit_s: float = 1e-9
    samples: int = 0
    workers: int = 0
    warnings: list[str] = field(default_factory=list)
    root: bool = True
    wraps: list[str] = field(default_factory=list)
    # functions this one calls that were not line-profiled (beyond --lineprof-depth): their
    # time is on the lines that call them
    unprofiled: list[str] = field(default_factory=list)
    path: str | None = None  # where it was read from
    # how the lines sit in the source file as it is now (source.match_source), found when the
    # stats are read (off the GUI thread), never when they are shown
    match: SourceMatch | None = field(default=None, compare=False, repr=False)

    @property
    def total_s(self) -> float:
        return float(sum(ln.total_s for ln in self.lines))

    def share(self, line: Line) -> float:
        total = self.total_s
        return line.total_s / total if total > 0 else 0.0

    def shares(self) -> list[float]:
        """share() of every line, in order (one sum, not one per line: a file may hold many)."""
        total = self.total_s
        return [ln.total_s / total if total > 0 else 0.0 for ln in self.lines]

    def top_lines(self, n: int = 5) -> list[Line]:
        ranked = sorted((ln for ln in self.lines if ln.total_s > 0), key=lambda ln: -ln.total_s)
        return ranked[:n]

    def unprofiled_note(self) -> str:
        """What the heatmap and the table say when functions this one calls were not profiled
        ('' when none): their time is on the lines that call them, their lines unseen."""
        if not self.unprofiled:
            return ""
        shown = ", ".join(f"{name}()" for name in self.unprofiled[:4])
        more = f" and {len(self.unprofiled) - 4} more" if len(self.unprofiled) > 4 else ""
        return (f"{shown}{more}, called here, were not line-profiled: their time shows on the "
                "line that calls them; rerun with --lineprof-depth 1 (or deeper) to see their "
                "lines too")

    def line(self, lineno: int) -> Line | None:
        for ln in self.lines:
            if ln.lineno == lineno:
                return ln
        return None

    def to_json(self) -> dict:
        return {
            "version": FORMAT_VERSION,
            "function": self.function,
            "qualname": self.qualname,
            "file": self.file,
            "first_line": self.first_line,
            "unit_s": self.unit_s,
            "total_s": self.total_s,
            "samples": self.samples,
            "workers": self.workers,
            "lines": [{"lineno": ln.lineno, "hits": ln.hits, "total_s": ln.total_s,
                       "source": ln.source} for ln in self.lines],
            "warnings": list(self.warnings),
            "root": self.root,
            "wraps": list(self.wraps),
            "unprofiled": list(self.unprofiled),
        }


# ---------------------------------------------------------------------------------------------
# JSON


def load(path: str | os.PathLike, inside: str | os.PathLike | None = None) -> Profile:
    """Read one lineprof JSON file; LineprofError names the file and what is wrong. With
    `inside` (a session folder) the file must resolve to a place under it."""
    path = Path(path)
    try:
        obj = json.loads(read_regular(path, JSON_CAP, inside).decode("utf-8"))
    except Refused as exc:
        raise LineprofError(f"{path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise LineprofError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") \
            from None
    except json.JSONDecodeError as exc:
        raise LineprofError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise LineprofError(f"{path}: not a line-stats file (JSON nested too deeply)") from None
    return from_json(obj, str(path))


def from_json(obj: object, name: str = "<json>") -> Profile:
    """A Profile from a parsed line-stats file. Only a file that is not line stats at all is
    refused; a bad field (a line entry, `samples: "many"`) is left out, and a warning naming
    it and the file keeps the rest of the stats standing."""
    if not isinstance(obj, dict) or "lines" not in obj or "qualname" not in obj:
        raise LineprofError(f"{name}: not a stallscope line-stats file (no 'qualname'/'lines')")
    version = obj.get("version", FORMAT_VERSION)
    if not isinstance(version, int) or isinstance(version, bool):
        raise LineprofError(f"{name}: not a stallscope line-stats file (version {version!r})")
    if version > FORMAT_VERSION:
        raise LineprofError(f"{name}: written by a newer stallscope (format version "
                            f"{obj.get('version')}, this one reads {FORMAT_VERSION})")
    if not isinstance(obj["qualname"], str) or not isinstance(obj["lines"], list):
        raise LineprofError(f"{name}: not a stallscope line-stats file ('qualname' must be "
                            "text and 'lines' a list)")
    bad: list[str] = []
    lines = _lines(obj["lines"], bad)
    if bad and not lines:
        raise LineprofError(f"{name}: malformed line entry ({bad[0]}); none of its "
                            f"{len(obj['lines'])} line entries can be read")
    fields = _Fields(obj, bad)
    qualname = obj["qualname"]
    profile = Profile(
        function=fields.get("function", str, qualname.rsplit(".", 1)[-1]) or qualname,
        qualname=qualname,
        file=fields.get("file", str, ""),
        first_line=fields.get("first_line", int, lines[0].lineno if lines else 1),
        lines=sorted(lines, key=lambda ln: ln.lineno),
        unit_s=fields.get("unit_s", float, 1e-9),
        samples=fields.get("samples", int, 0),
        workers=fields.get("workers", int, 0),
        warnings=[str(w) for w in fields.get("warnings", list, [])],
        root=fields.get("root", bool, True),
        wraps=[str(w) for w in fields.get("wraps", list, [])],
        unprofiled=[str(w) for w in fields.get("unprofiled", list, [])],
        path=name,
    )
    if bad:
        profile.warnings.append(f"{name}: left out {len(bad)} bad field(s): {'; '.join(bad[:5])}"
                                + (f"; ... {len(bad) - 5} more" if len(bad) > 5 else ""))
    return profile


class _Fields:
    """A file's top-level fields, each checked alone: a bad one gives its default and is
    named in `bad`."""

    def __init__(self, obj: dict, bad: list[str]) -> None:
        self.obj = obj
        self.bad = bad

    def get(self, key: str, kind: type, default: Any) -> Any:
        if key not in self.obj or self.obj[key] is None:
            return default
        value = self.obj[key]
        ok = _is(value, kind)
        if not ok:
            self.bad.append(f"{key!r} is {_shown(value)}, not {_KIND_WORDS[kind]}")
            return default
        return float(value) if kind is float else value


_KIND_WORDS = {str: "text", int: "a whole number", float: "a number", bool: "true or false",
               list: "a list"}


def _is(value: object, kind: type) -> bool:
    if kind is float:
        return (isinstance(value, int | float) and not isinstance(value, bool)
                and math.isfinite(value))
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _shown(value: object) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _lines(entries: list, bad: list[str]) -> list[Line]:
    """Every well-formed line entry; each bad one is left out and named in `bad`."""
    lines = []
    for i, entry in enumerate(entries):
        why = _bad_line(entry)
        if why:
            bad.append(f"lines[{i}]: {why}")
            continue
        lines.append(Line(entry["lineno"], entry["hits"], float(entry["total_s"]),
                          str(entry.get("source", ""))))
    return lines


def _bad_line(entry: object) -> str:
    if not isinstance(entry, dict):
        return f"{_shown(entry)} is not a line entry"
    for key, kind in (("lineno", int), ("hits", int), ("total_s", float)):
        if key not in entry:
            return f"no {key!r}"
        if not _is(entry[key], kind):
            return f"{key!r} is {_shown(entry[key])}, not {_KIND_WORDS[kind]}"
    if entry["lineno"] < 1 or entry["hits"] < 0 or entry["total_s"] < 0:
        return f"a negative or zero number ({_shown(entry)})"
    return ""


def save(profile: Profile, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(profile.to_json(), indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return path
