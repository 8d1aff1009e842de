"""Line stats of one profiled function: the model (Line, Profile) and its JSON file.

A session's `lineprof/<Class.method>.json` holds one profiled function (written by
core/capture/lineprof_capture.py in the user's interpreter):

    {"version": 1, "function", "qualname", "file", "first_line", "unit_s", "total_s",
     "samples", "workers", "lines": [{"lineno", "hits", "total_s", "source"}], "warnings": [...]}

`samples` is the number of calls; `total_s` the sum of the lines' time.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

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
    if not isinstance(obj, dict) or "lines" not in obj or "qualname" not in obj:
        raise LineprofError(f"{name}: not a stallscope line-stats file (no 'qualname'/'lines')")
    version = obj.get("version", FORMAT_VERSION)
    if not isinstance(version, int) or isinstance(version, bool):
        raise LineprofError(f"{name}: not a stallscope line-stats file (version {version!r})")
    if version > FORMAT_VERSION:
        raise LineprofError(f"{name}: written by a newer stallscope (format version "
                            f"{obj.get('version')}, this one reads {FORMAT_VERSION})")
    try:
        lines = [Line(int(ln["lineno"]), int(ln["hits"]), float(ln["total_s"]),
                      str(ln.get("source", ""))) for ln in obj["lines"]]
        return Profile(
            function=str(obj.get("function") or obj["qualname"].rsplit(".", 1)[-1]),
            qualname=str(obj["qualname"]),
            file=str(obj.get("file", "")),
            first_line=int(obj.get("first_line", lines[0].lineno if lines else 1)),
            lines=sorted(lines, key=lambda ln: ln.lineno),
            unit_s=float(obj.get("unit_s", 1e-9)),
            samples=int(obj.get("samples", 0)),
            workers=int(obj.get("workers", 0)),
            warnings=[str(w) for w in obj.get("warnings", [])],
            root=bool(obj.get("root", True)),
            wraps=[str(w) for w in obj.get("wraps", [])],
            path=name,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise LineprofError(f"{name}: malformed line entry ({type(exc).__name__}: {exc})") from None


def save(profile: Profile, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(profile.to_json(), indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return path
