"""Advice v2 (DESIGN.md "Advice rules"): cards with their numbers, fix and `saving_us`, largest
saving first, and the headlines above them.

    cards = advise(report, line_stats)       # line_stats: the line heatmap's profiles, or None
    tops = headlines(report)

Rules live in cause_rules (one per idle cause) and other_rules (pageable copies, allocator
churn, exposed communication), registered by id with `@rule`; registry holds the Context they
read and the shared thresholds. Nothing here reads files: callers that know the session pass
its line stats (`line_stats_near(trace_path)` finds them).
"""

from __future__ import annotations

import os

from stallscope.core.advice import (  # noqa: F401  (register the rules)
    cause_rules,
    comm_rules,
    line_rules,
    other_rules,
)
from stallscope.core.advice.headlines import headlines
from stallscope.core.advice.registry import MINOR_SHARE, RULES, Context, rule
from stallscope.core.errors import StallscopeError
from stallscope.core.lineprof import Profile, load_session, session_of
from stallscope.core.report import Advice, Report

__all__ = ["MINOR_SHARE", "RULES", "Advice", "Context", "Profile", "advise", "headlines",
           "line_stats_near", "rule"]


def advise(report: Report, line_stats: list[Profile] | None = None,
           loaders: list[dict] | None = None) -> list[Advice]:
    """Every rule's card, largest saving first; cards worth < 1% of the base are minor and
    come after the others. `loaders`: the session's DataLoaders (run.json `dataloaders`), so a
    fix can name the user's line."""
    ctx = Context(report, line_stats, loaders=loaders or [])
    cards = [card for fn in RULES.values() if (card := fn(ctx)) is not None]
    for card in cards:
        card.minor = card.saving_us < MINOR_SHARE * ctx.base_us
    return sorted(cards, key=lambda a: (a.minor, -a.saving_us, a.id))


def line_stats_near(trace_path: str | os.PathLike | None) -> list[Profile] | None:
    """The line stats of the session a trace belongs to (its lineprof/ folder); None without."""
    session = session_of(trace_path)
    if session is None:
        return None
    try:
        return load_session(session) or None
    except StallscopeError:
        return None
