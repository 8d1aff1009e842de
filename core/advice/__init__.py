"""Advice (docs/definitions.md "Advice"): cards with their numbers, culprits, fix and
`saving_us`, largest saving first, and the headlines above them.

    cards = advise(report, line_stats, loaders)  # line stats and run.json's DataLoaders, or None
    tops = headlines(report)

Rules live in cause_rules (one per idle cause), other_rules (pageable copies, allocator churn,
exposed communication), comm_rules (collectives on other threads) and line_rules (the hot
__getitem__ line), registered by id with `@rule`; registry holds the Context they read and the
shared thresholds, fixes the fix texts fitted to the trace. Nothing here reads files:
document.analyze_path reads the session's line stats and DataLoaders and passes them in.
"""

from __future__ import annotations

from stallscope.core.advice import (  # noqa: F401  (register the rules)
    cause_rules,
    comm_rules,
    line_rules,
    other_rules,
)
from stallscope.core.advice.headlines import headlines
from stallscope.core.advice.registry import MINOR_SHARE, RULES, Context, rule
from stallscope.core.advice.window_card import split
from stallscope.core.lineprof import Profile
from stallscope.core.report import Advice, Report

__all__ = ["MINOR_SHARE", "RULES", "Advice", "Context", "Profile", "advise", "advise_report",
           "headlines", "rule"]


def advise_report(report: Report, line_stats: list[Profile] | None = None,
                  loaders: list[dict] | None = None, cores: int | None = None,
                  place: str = "") -> None:
    """Fill the report's headlines, cards and withheld cards: window first, then causes."""
    report.headlines = headlines(report)
    report.advice, report.withheld = split(report, advise(report, line_stats, loaders, cores,
                                                          place))


def advise(report: Report, line_stats: list[Profile] | None = None,
           loaders: list[dict] | None = None, cores: int | None = None,
           place: str = "") -> list[Advice]:
    """Every rule's card, largest saving first; cards worth < 1% of the base are minor and
    come after the others. `loaders`: the session's DataLoaders (run.json `dataloaders`), so a
    fix can name the user's line; `cores`: the recording machine's usable CPUs (run.json);
    `place`: the CLI options that run the script where the session ran (a host's)."""
    ctx = Context(report, line_stats, loaders=loaders or [], cores=cores, place=place)
    cards = [card for fn in RULES.values() if (card := fn(ctx)) is not None]
    for card in cards:
        card.minor = card.saving_us < MINOR_SHARE * ctx.base_us
    return sorted(cards, key=lambda a: (a.minor, -a.saving_us, a.id))

