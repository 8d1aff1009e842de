"""Line stats of Dataset.__getitem__: the JSON format, kernprof `.lprof` files, kernprof's table.

A session's `lineprof/<Class.method>.json` holds one profiled function (written by
core/capture/lineprof_capture.py in the user's interpreter):

    {"version": 1, "function", "qualname", "file", "first_line", "unit_s", "total_s",
     "samples", "workers", "lines": [{"lineno", "hits", "total_s", "source"}], "warnings": [...]}

`samples` is the number of calls; `total_s` the sum of the lines' time. A `.lprof` file is a
pickle made by kernprof and is read only when the caller passes trust_pickle=True.
"""

from __future__ import annotations

import difflib
import io
import json
import os
import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path

from stallscope.core.errors import StallscopeError

FORMAT_VERSION = 1
LINEPROF_DIR = "lineprof"


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

    @property
    def total_s(self) -> float:
        return float(sum(ln.total_s for ln in self.lines))

    def share(self, line: Line) -> float:
        total = self.total_s
        return line.total_s / total if total > 0 else 0.0

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


def load(path: str | os.PathLike) -> Profile:
    """Read one lineprof JSON file; LineprofError names the file and what is wrong."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as fh:
            obj = json.load(fh)
    except FileNotFoundError:
        raise LineprofError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LineprofError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise LineprofError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    return from_json(obj, str(path))


def from_json(obj: object, name: str = "<json>") -> Profile:
    if not isinstance(obj, dict) or "lines" not in obj or "qualname" not in obj:
        raise LineprofError(f"{name}: not a stallscope line-stats file (no 'qualname'/'lines')")
    if obj.get("version", FORMAT_VERSION) > FORMAT_VERSION:
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
    except (KeyError, TypeError, ValueError) as exc:
        raise LineprofError(f"{name}: malformed line entry ({type(exc).__name__}: {exc})") from None


def save(profile: Profile, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(profile.to_json(), indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return path


def merge(profiles: list[Profile]) -> Profile:
    """Sum several profiles of the same function (e.g. runs or processes) line by line."""
    if not profiles:
        raise ValueError("merge() needs at least one profile")
    first = profiles[0]
    for p in profiles[1:]:
        if (p.file, p.qualname) != (first.file, first.qualname):
            raise LineprofError(f"cannot merge {p.qualname} ({p.file}) into "
                                f"{first.qualname} ({first.file}): different functions")
    by_line: dict[int, Line] = {}
    for p in profiles:
        for ln in p.lines:
            cur = by_line.get(ln.lineno)
            if cur is None:
                by_line[ln.lineno] = Line(ln.lineno, ln.hits, ln.total_s, ln.source)
            else:
                cur.hits += ln.hits
                cur.total_s += ln.total_s
                cur.source = cur.source or ln.source
    warnings = list(dict.fromkeys(w for p in profiles for w in p.warnings))
    return Profile(first.function, first.qualname, first.file,
                   min(p.first_line for p in profiles),
                   sorted(by_line.values(), key=lambda ln: ln.lineno),
                   unit_s=min(p.unit_s for p in profiles),
                   samples=sum(p.samples for p in profiles),
                   workers=sum(p.workers for p in profiles), warnings=warnings,
                   root=any(p.root for p in profiles), wraps=first.wraps)


# ---------------------------------------------------------------------------------------------
# kernprof .lprof (a pickle)


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

            return copyreg._reconstructor
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
        with open(path, "rb") as fh:
            stats = _LprofUnpickler(fh).load()
    except FileNotFoundError:
        raise LineprofError(f"{path}: no such file") from None
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
    src = _read_source(file)
    if src is None:
        warnings.append(f"{file}: source not found; showing line numbers without code")
        src = []
    elif stats_mtime is not None and _mtime(file) > stats_mtime:
        warnings.append(f"{file} changed after these stats were written; "
                        "the code shown may not match the timings")
    timed = {lineno: (hits, t * unit) for lineno, hits, t in rows}
    last = max([first, *timed])
    if src:
        last = max(last, _block_end(src, first))
    lines = []
    for lineno in range(first, last + 1):
        hits, t = timed.get(lineno, (0, 0.0))
        text = src[lineno - 1].rstrip("\r\n") if 0 < lineno <= len(src) else ""
        lines.append(Line(lineno, hits, t, text))
    # kernprof has no call count: the hits of the first executed line are the closest thing.
    samples = next((h for ln, (h, _t) in sorted(timed.items()) if h), 0)
    return Profile(name.rsplit(".", 1)[-1], name, file, first, lines, unit_s=unit,
                   samples=samples, workers=0, warnings=warnings, path=origin)


# ---------------------------------------------------------------------------------------------
# Source matching


def _read_source(file: str) -> list[str] | None:
    try:
        with open(file, encoding="utf-8", errors="replace") as fh:
            return fh.readlines()
    except OSError:
        return None


def _mtime(file: str) -> float:
    try:
        return os.stat(file).st_mtime
    except OSError:
        return 0.0


def _block_end(src: list[str], first: int) -> int:
    import inspect

    if not (0 < first <= len(src)):
        return first
    try:
        return first + len(inspect.getblock(src[first - 1:])) - 1
    except Exception:  # noqa: BLE001 - tokenizer trouble: fall back to the profiled lines
        return first


@dataclass
class SourceMatch:
    """How a profile's lines sit in the current file."""

    current: dict[int, int | None]  # profiled lineno -> current lineno (None: gone)
    changed: bool
    warning: str | None


def match_source(profile: Profile) -> SourceMatch:
    """Compare the source saved with the profile to the file as it is now. Lines whose text
    moved are found again by content; the rest are reported."""
    src = _read_source(profile.file)
    mapping: dict[int, int | None] = {ln.lineno: ln.lineno for ln in profile.lines}
    if src is None:
        return SourceMatch(mapping, False,
                           f"{profile.file}: source file not found; showing the code as profiled")
    now = [s.rstrip("\r\n") for s in src]
    differ = [ln for ln in profile.lines
              if not (0 < ln.lineno <= len(now) and now[ln.lineno - 1] == ln.source)]
    if not differ:
        return SourceMatch(mapping, False, None)
    old = [ln.source for ln in profile.lines]
    sm = difflib.SequenceMatcher(None, old, now, autojunk=False)
    mapping = {ln.lineno: None for ln in profile.lines}
    for a, b, size in sm.get_matching_blocks():
        for k in range(size):
            mapping[profile.lines[a + k].lineno] = b + k + 1
    timed = [ln for ln in profile.lines if ln.hits]
    lost = [ln.lineno for ln in timed if mapping[ln.lineno] is None]
    moved = sum(1 for ln in timed if mapping[ln.lineno] not in (None, ln.lineno))
    name = os.path.basename(profile.file)
    parts = []
    if moved:
        parts.append(f"{_plural(moved, 'timed line')} now at other line numbers")
    if lost:
        shown = ", ".join(str(n) for n in lost[:8]) + (" ..." if len(lost) > 8 else "")
        parts.append(f"{_plural(len(lost), 'timed line')} no longer in the file "
                     f"(profiled line{'s' if len(lost) > 1 else ''} {shown})")
    if not parts:
        parts.append(f"{_plural(len(differ), 'line')} of the function differ")
    msg = f"{name} changed since the run: {'; '.join(parts)}; showing the code as profiled"
    return SourceMatch(mapping, True, msg)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# ---------------------------------------------------------------------------------------------
# Sessions and files


def find_profiles(path: str | os.PathLike) -> list[Path]:
    """Line-stats JSON files of a session folder (or its lineprof/ folder)."""
    path = Path(path)
    folder = path / LINEPROF_DIR if (path / LINEPROF_DIR).is_dir() else path
    if not folder.is_dir() or folder.name != LINEPROF_DIR:
        return []
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))


def load_session(path: str | os.PathLike) -> list[Profile]:
    """Every profile of a session, the dataset's __getitem__ (root) first, heaviest first."""
    profiles = []
    for p in find_profiles(path):
        profiles.append(load(p))
    profiles.sort(key=lambda p: (not p.root, -p.total_s))
    return profiles


def load_any(path: str | os.PathLike, *, trust_pickle: bool = False) -> list[Profile]:
    """A session folder, a lineprof/*.json file or a kernprof .lprof file."""
    path = Path(path)
    if path.is_dir():
        profiles = load_session(path)
        if not profiles:
            raise LineprofError(f"{path}: no line stats here (no {LINEPROF_DIR}/*.json); "
                                "run with --lineprof auto to record them")
        return profiles
    if not path.exists():
        raise LineprofError(f"{path}: no such file or folder")
    if path.suffix == ".lprof" or _looks_like_pickle(path):
        profiles = load_lprof(path, trust_pickle=trust_pickle)
        if not profiles:
            raise LineprofError(f"{path}: the .lprof file holds no functions")
        return profiles
    return [load(path)]


def _looks_like_pickle(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(1) == b"\x80"
    except OSError:
        return False


def primary(profiles: list[Profile]) -> Profile | None:
    """The dataset's own __getitem__: a root that wraps no other profiled dataset, heaviest."""
    roots = [p for p in profiles if p.root and not p.wraps] or [p for p in profiles if p.root]
    roots = roots or profiles
    return max(roots, key=lambda p: p.total_s) if roots else None


def heaviest_line(session_dir: str | os.PathLike) -> tuple[str, int, str, float] | None:
    """(function, lineno, source, share of the function's time) of the line that costs the most
    in the session's dataset __getitem__, or None without line stats. When that line calls a
    helper profiled with --lineprof-depth, the helper's heaviest line is named instead (its
    share still relative to __getitem__)."""
    try:
        profiles = load_session(session_dir)
    except StallscopeError:
        return None
    top = primary(profiles)
    if top is None or top.total_s <= 0:
        return None
    line = top.top_lines(1)[0]
    total = top.total_s
    for helper in profiles:
        if helper is top or helper.total_s <= 0:
            continue
        if _calls(line.source, helper.function):
            inner = helper.top_lines(1)[0]
            if inner.total_s > 0.5 * line.total_s:
                return (helper.qualname, inner.lineno, inner.source.strip(),
                        min(1.0, inner.total_s / total))
    return (top.qualname, line.lineno, line.source.strip(), line.total_s / total)


def session_of(path: str | os.PathLike | None) -> Path | None:
    """The session folder holding line stats for a trace file (session/traces/x.json.gz) or a
    session folder; None when there are none."""
    if path is None:
        return None
    p = Path(path)
    for folder in (p, p.parent, p.parent.parent):
        if (folder / LINEPROF_DIR).is_dir() and find_profiles(folder):
            return folder
    return None


def advice_evidence(trace_path: str | os.PathLike | None) -> str:
    """A sentence for the dataloader_bound advice naming the heaviest line of __getitem__ when
    the trace's session has line stats; "" otherwise."""
    session = session_of(trace_path)
    found = heaviest_line(session) if session is not None else None
    if found is None:
        return ""
    func, lineno, source, share = found
    code = source if len(source) <= 70 else source[:67] + "..."
    return (f" Line heatmap: the heaviest line is {func} line {lineno} (`{code}`), "
            f"{100 * share:.0f}% of the time in __getitem__.")


def _calls(source: str, name: str) -> bool:
    import re

    return re.search(rf"(?<![\w]){re.escape(name)}\s*\(", source) is not None


def install_command(python: str | None = None) -> list[str]:
    """The command that installs line_profiler into the interpreter that runs the script."""
    return [python or sys.executable, "-m", "pip", "install", "line_profiler"]


def line_profiler_missing(python: str | None = None, timeout: float = 30.0) -> str | None:
    """None when `python` can import line_profiler, else a message with the install command."""
    import subprocess

    exe = python or sys.executable
    try:
        proc = subprocess.run([exe, "-c", "import line_profiler"], capture_output=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{exe}: cannot run this interpreter ({exc})"
    if proc.returncode == 0:
        return None
    return (f"line_profiler is not installed in {exe}; install it with: "
            f"{' '.join(install_command(exe))}")


# ---------------------------------------------------------------------------------------------
# kernprof-like text


def format_table(profile: Profile, match: SourceMatch | None = None) -> str:
    """The table kernprof prints (Line #, Hits, Time, Per Hit, % Time, Line Contents); times in
    microseconds, plus per-sample time and any warnings."""
    out = io.StringIO()
    total = profile.total_s
    out.write(f"Total time: {total:g} s\n")
    out.write(f"File: {profile.file}\n")
    out.write(f"Function: {profile.qualname} at line {profile.first_line}\n")
    per = f"{total / profile.samples * 1e3:.3f} ms/sample" if profile.samples else "n/a"
    out.write(f"Samples: {profile.samples} ({per})"
              + (f", merged over {profile.workers} worker processes" if profile.workers else "")
              + "\n")
    for w in [*profile.warnings, *([match.warning] if match and match.warning else [])]:
        out.write(f"Warning: {w}\n")
    rows = []
    for ln in profile.lines:
        if ln.hits:
            rows.append((str(ln.lineno), str(ln.hits), _num(ln.total_s * 1e6),
                         _num(ln.per_hit_s * 1e6), f"{100 * profile.share(ln):5.1f}", ln.source))
        else:
            rows.append((str(ln.lineno), "", "", "", "", ln.source))
    header = ("Line #", "Hits", "Time", "Per Hit", "% Time", "Line Contents")
    widths = [max([6, len(header[0])] + [len(r[0]) for r in rows]),
              max([9] + [len(r[1]) for r in rows]),
              max([12] + [len(r[2]) for r in rows]),
              max([8] + [len(r[3]) for r in rows]),
              8]
    fmt = " ".join(f"%{w}s" for w in widths) + "  %-s"
    head = fmt % header
    out.write("Timer unit: 1e-06 s (Time, Per Hit in microseconds)\n\n")
    out.write(head + "\n" + "=" * len(head) + "\n")
    for r in rows:
        out.write((fmt % r).rstrip() + "\n")
    return out.getvalue()


def _num(x: float) -> str:
    s = f"{x:.1f}"
    return s if len(s) <= 12 else f"{x:.4g}"
