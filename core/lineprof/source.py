"""The source of a profiled function: read it, find its end, match it to the file as it is now,
and match the lines of two profiles (after vs before).

    match_source(profile) -> SourceMatch      # moved/removed lines since the run, and a warning
    match_lines(after, before) -> {lineno: Line of before}
    common_indent(lines) -> int               # a method's source shown flush left
"""

from __future__ import annotations

import difflib
import io
import os
from dataclasses import dataclass

from stallscope.core.files import Refused, read_regular
from stallscope.core.lineprof.stats import Line, Profile
from stallscope.core.units import plural

SOURCE_CAP = 8 << 20    # a Python source file shown beside its line stats


def read_source(file: str) -> list[str] | None:
    """The file's lines; None when it is missing, not a regular file or over SOURCE_CAP."""
    try:
        return _source_lines(file)
    except Refused:
        return None


def _source_lines(file: str) -> list[str]:
    data = read_regular(file, SOURCE_CAP)
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace").readlines()


def mtime(file: str) -> float:
    try:
        return os.stat(file).st_mtime
    except OSError:
        return 0.0


def block_end(src: list[str], first: int) -> int:
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
    mapping: dict[int, int | None] = {ln.lineno: ln.lineno for ln in profile.lines}
    try:
        src = _source_lines(profile.file)
    except Refused as why:
        return SourceMatch(mapping, False,
                           f"{profile.file}: source file {why}; showing the code as profiled")
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
        parts.append(f"{plural(moved, 'timed line')} now at other line numbers")
    if lost:
        shown = ", ".join(str(n) for n in lost[:8]) + (" ..." if len(lost) > 8 else "")
        parts.append(f"{plural(len(lost), 'timed line')} no longer in the file "
                     f"(profiled line{'s' if len(lost) > 1 else ''} {shown})")
    if not parts:
        parts.append(f"{plural(len(differ), 'line')} of the function differ")
    msg = f"{name} changed since the run: {'; '.join(parts)}; showing the code as profiled"
    return SourceMatch(mapping, True, msg)


def with_sources(profiles: list[Profile]) -> list[Profile]:
    """The profiles, each with its `match` against the source file as it is now."""
    for p in profiles:
        p.match = match_source(p)
    return profiles


def match_lines(after: Profile, before: Profile) -> dict[int, Line]:
    """Line of `before` for each line of `after`: same number and text, else same text."""
    by_text: dict[str, list[Line]] = {}
    for ln in before.lines:
        by_text.setdefault(ln.source.strip(), []).append(ln)
    out = {}
    used: set[int] = set()
    by_number = {ln.lineno: ln for ln in before.lines}
    for ln in after.lines:
        same = by_number.get(ln.lineno)
        if same is not None and same.source.strip() == ln.source.strip():
            out[ln.lineno] = same
            used.add(id(same))
    unused = {text: iter(lines) for text, lines in by_text.items()}  # each walked once
    for ln in after.lines:
        if ln.lineno in out or not ln.source.strip():
            continue
        first = next((c for c in unused.get(ln.source.strip(), ()) if id(c) not in used), None)
        if first is not None:
            out[ln.lineno] = first
            used.add(id(first))
    return out


def common_indent(lines: list[Line]) -> int:
    """Indentation every non-blank line shares (a method's source shown flush left)."""
    widths = [len(s) - len(s.lstrip()) for s in (ln.source.expandtabs(4) for ln in lines)
              if s.strip()]
    return min(widths, default=0)
