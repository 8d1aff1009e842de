"""Window first, then causes (docs/definitions.md "Window kinds" and "Lacks"): a window that is
not steady training, or a trace that recorded too little to judge, gets ONE card that says so
(what the window is, what its one-off parts cost, how to record steady steps); the cause cards
are withheld, shown folded as "if this were steady". A cause the trace cannot know (Python
time without CPU operators) loses its card the same way."""

from __future__ import annotations

from stallscope.core.causes import BY_CODE
from stallscope.core.report import Advice, Report
from stallscope.core.units import duration, pct

CAUSE_OF_CARD = {"python_overhead": "python"}  # cards of causes the trace may not know


def lead_cards(report: Report) -> list[Advice]:
    """The one card said before any cause: a lack that withholds (with the window's kind in
    its evidence), else the window's kind; none for a steady, well-recorded window."""
    found = report.window_finding
    lack = next((lack for lack in report.lacks if lack.withholds), None)
    if lack is not None:  # one card: what is missing, then what the window is
        also = f" {found.title}: {found.evidence}" if found is not None else ""
        return [Advice(lack.id, _lack_title(lack.id), lack.text + also, lack.fix)]
    cards = []
    if found is not None:
        width = report.window_us
        one_off = min(sum(c.covered_us for c in found.culprits), width)
        parts = "; ".join(f"{c.name} {duration(c.covered_us)} ({pct(c.covered_us / width)})"
                          for c in found.culprits) if width > 0 else ""
        evidence = found.evidence + (f" One-off: {parts}." if parts else "")
        cards.append(Advice("window", found.title, evidence, found.fix, saving_us=one_off,
                            culprits=list(found.culprits),
                            focus=_focus(report) if found.culprits else None))
    return cards


def split(report: Report, cards: list[Advice]) -> tuple[list[Advice], list[Advice]]:
    """(shown, withheld): a report that is not advisable shows its lead cards only; otherwise
    the cards of causes the trace cannot know are withheld."""
    lead = lead_cards(report)
    if lead:
        return lead, cards
    unknown = set(report.unknown_causes)
    shown = [c for c in cards if CAUSE_OF_CARD.get(c.id, c.cause) not in unknown]
    return shown, [c for c in cards if c not in shown]


def unknown_text(cause: str) -> str:
    return f"{BY_CODE[cause].label}: unknown (the trace has no CPU operators)"


def _lack_title(lack_id: str) -> str:
    return {"too_short": "This trace is too short to judge",
            "kernels_filtered": "This trace's kernels were filtered out",
            "range_profiler": "This trace's timing is distorted by the range profiler",
            }.get(lack_id, "This trace recorded too little to judge")


def _focus(report: Report) -> tuple[float, float] | None:
    return report.window if report.window_us > 0 else None
