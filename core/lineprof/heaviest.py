"""The line that costs the most in the dataset's __getitem__, for the advice and the start screen.

    primary(profiles) -> Profile | None               # the dataset's own __getitem__
    heaviest_line_of(profiles) -> (func, lineno, source, share) | None   # pure
    evidence(profiles) -> str                          # a sentence for the dataloader_bound card
    heaviest_line(session_dir)                         # the same, read from a session folder
"""

from __future__ import annotations

import os
import re

from stallscope.core.errors import StallscopeError
from stallscope.core.lineprof.files import load_session
from stallscope.core.lineprof.stats import Profile
from stallscope.core.units import pct

Heaviest = tuple[str, int, str, float]  # (function, lineno, source, share of __getitem__ time)


def primary(profiles: list[Profile]) -> Profile | None:
    """The dataset's own __getitem__: a root that wraps no other profiled dataset, heaviest."""
    roots = [p for p in profiles if p.root and not p.wraps] or [p for p in profiles if p.root]
    roots = roots or profiles
    return max(roots, key=lambda p: p.total_s) if roots else None


def heaviest_line_of(profiles: list[Profile]) -> Heaviest | None:
    """(function, lineno, source, share of the function's time) of the line that costs the most
    in the dataset's __getitem__, or None without timed lines. When that line calls a helper
    profiled with --lineprof-depth, the helper's heaviest line is named instead (its share still
    relative to __getitem__)."""
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


def heaviest_line(session_dir: str | os.PathLike) -> Heaviest | None:
    """heaviest_line_of() the line stats of a session folder; None without (readable) ones."""
    try:
        return heaviest_line_of(load_session(session_dir))
    except StallscopeError:
        return None


def evidence(profiles: list[Profile]) -> str:
    """A sentence for the dataloader_bound advice naming the heaviest line of __getitem__;
    "" without line stats."""
    found = heaviest_line_of(profiles)
    if found is None:
        return ""
    func, lineno, source, share = found
    code = source if len(source) <= 70 else source[:67] + "..."
    return (f" Line heatmap: the heaviest line is {func} line {lineno} (`{code}`), "
            f"{pct(share, 0)} of the time in __getitem__.")


def _calls(source: str, name: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}\s*\(", source) is not None
