"""Where line stats live and how any of them is opened: a session's `lineprof/*.json`, one JSON
file, or a kernprof `.lprof` (a pickle, only when trusted).

    find_profiles(session) -> [Path]          # the session's lineprof/*.json
    load_session(session) -> [Profile]        # root __getitem__ first, heaviest first
    load_any(path, trust_pickle=False) -> [Profile]
    session_of(trace_or_session) -> Path | None
    read_stats(path) -> (session | None, [Profile])   # what the app shows for a path, each
                                                      # profile matched to its source file
    session_stats(trace_or_session) -> SessionStats   # the same, an error kept, not raised
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from stallscope.core.errors import StallscopeError
from stallscope.core.lineprof.kernprof import load_lprof, looks_like_pickle
from stallscope.core.lineprof.source import with_sources
from stallscope.core.lineprof.stats import LineprofError, Profile, load
from stallscope.core.untrusted import json_lines, read_bytes, read_json, visible

LINEPROF_DIR = "lineprof"
EVENTS_READ = 64 << 20  # the line profiler's warnings of a run whose stats are missing


@dataclass(frozen=True)
class SessionStats:
    """The line stats of the session a path belongs to: read once, for the advice and for the
    heatmap (profiles matched to their source files)."""

    session: Path | None = None                 # None: the path is in no session with stats
    profiles: list[Profile] = field(default_factory=list)
    error: str | None = None                    # why the session's line stats were not read

    @property
    def for_advice(self) -> list[Profile] | None:
        return self.profiles or None


def find_profiles(path: str | os.PathLike) -> list[Path]:
    """Line-stats JSON files of a session folder (or its lineprof/ folder)."""
    path = Path(path)
    folder = path / LINEPROF_DIR if (path / LINEPROF_DIR).is_dir() else path
    if not folder.is_dir() or folder.name != LINEPROF_DIR:
        return []
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))


def load_session(path: str | os.PathLike) -> list[Profile]:
    """Every profile of a session, the dataset's __getitem__ (root) first, heaviest first.
    A file that cannot be read is named in the first profile's warnings; when none can be
    read, the first one's error is raised."""
    folder = Path(path)
    profiles, errors = [], []
    for p in find_profiles(folder):
        try:
            profiles.append(load(p, inside=folder))
        except LineprofError as exc:
            errors.append(exc)
    if errors and not profiles:
        raise errors[0]
    profiles.sort(key=lambda p: (not p.root, -p.total_s))
    if errors:
        profiles[0].warnings.extend(f"not read: {e}" for e in errors)
    return profiles


def load_any(path: str | os.PathLike, *, trust_pickle: bool = False) -> list[Profile]:
    """A session folder, a lineprof/*.json file or a kernprof .lprof file."""
    path = Path(path)
    if path.is_dir():
        profiles = load_session(path)
        if not profiles:
            raise LineprofError(f"{path}: no line stats here (no {LINEPROF_DIR}/*.json); "
                                f"{why_none(path)}")
        return profiles
    if not path.exists():
        raise LineprofError(f"{path}: no such file or folder")
    if needs_trust(path):
        profiles = load_lprof(path, trust_pickle=trust_pickle)
        if not profiles:
            raise LineprofError(f"{path}: the .lprof file holds no functions")
        return profiles
    return [load(path)]


def why_none(session: Path) -> str:
    """Why a folder has no line stats, and what to run: a session run with --lineprof that
    found nothing to profile says what its runner said, never "run with --lineprof"."""
    try:
        run = read_json(session / "run.json", "run.json")
    except StallscopeError:
        run = None
    options = run.get("options") if isinstance(run, dict) else None
    target = options.get("lineprof") if isinstance(options, dict) else None
    if not isinstance(target, str) or target in ("", "off"):
        return "run with --lineprof auto to record them"
    said = _lineprof_warnings(session)
    name_one = ("name your Dataset's method: --lineprof module:Class.__getitem__ "
                "(__main__:Class.__getitem__ for one defined in the script)")
    if target == "auto":
        why = visible(said[0]) if said else "no Dataset was found to line-profile"
        return (f"the run had --lineprof auto, but {why}"
                + ("" if "--lineprof " in why else f"; {name_one}"))
    why = visible(said[0]) if said else "it wrote no line stats"
    return f"the run had --lineprof {visible(target)}, but {why}"


def _lineprof_warnings(session: Path) -> list[str]:
    """What the line profiler said during the run (events.jsonl's lineprof warnings)."""
    try:
        data = read_bytes(session / "events.jsonl", "events", EVENTS_READ)
    except StallscopeError:
        return []
    events, _bad = json_lines(data)
    return [str(e["message"]) for e in events if isinstance(e, dict)
            and e.get("source") == "lineprof" and isinstance(e.get("message"), str)]


def needs_trust(path: str | os.PathLike) -> bool:
    """A file that is a pickle (a kernprof .lprof, by name or by its first byte): reading it can
    run code, so the caller must ask first (the CLI's --trust-pickle, a dialog in the app)."""
    path = Path(path)
    return path.is_file() and (path.suffix == ".lprof" or looks_like_pickle(path))


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


def read_stats(path: str | os.PathLike, *, trust_pickle: bool = False,
               optional: bool = False) -> tuple[Path | None, list[Profile]]:
    """The line stats the app shows for `path`: those of the session it sits in (a trace under
    session/traces/, a lineprof/*.json, a session folder), else the file itself (load_any).
    Returns (session folder or None, profiles). With optional=True a path without line stats
    gives (None, []) instead of an error (a document that simply has none)."""
    session = session_of(path)
    if session is not None:
        return session, with_sources(load_session(session))
    if optional:
        return None, []
    return None, with_sources(load_any(path, trust_pickle=trust_pickle))


def session_stats(path: str | os.PathLike | None) -> SessionStats:
    """The line stats of the session `path` (a trace in one, or the folder) belongs to; a
    session whose files cannot be read keeps the one-line reason instead of raising."""
    session = session_of(path)
    if session is None:
        return SessionStats()
    try:
        return SessionStats(session, with_sources(load_session(session)))
    except StallscopeError as exc:
        return SessionStats(session, error=str(exc))
