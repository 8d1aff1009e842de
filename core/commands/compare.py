"""`stallscope-cli compare BEFORE AFTER [--json]`: the compare view's figures, headless.

BEFORE and AFTER are traces or session folders (a tune's trials are session folders); a tune
folder alone compares the two trials its confirmed claim rests on (the script as written and
the leader, of the median pair; a tune that confirmed no gain has none). The metrics, the
speed-up (and which statistic it is) and the mismatch warnings come from core/compare.py, as
in the app.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stallscope.core.capture.layout import TUNE_JSON
from stallscope.core.compare import (
    compare_reports,
    mismatch_warnings,
    speedup,
    statistic,
    unlike,
    verdict,
)
from stallscope.core.errors import StallscopeError
from stallscope.core.jobs import run_job

if TYPE_CHECKING:
    from stallscope.core.report import Report


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare", help="compare two traces or sessions: step time, data wait, utilization, "
                        "idle by cause",
        usage="stallscope-cli compare BEFORE AFTER [--json]   |   stallscope-cli compare TUNE_DIR",
        description="The compare view's figures without the app: per-step time, data loading, "
                    "GPU utilization and idle by cause, before and after, each with its change "
                    "(better or worse; ≈ within noise), then one verdict line: faster, slower "
                    "or about as fast, and the idle cause that moved most; warns when the two "
                    "are not like for like.",
    )
    p.add_argument("before", metavar="BEFORE", help="trace file, session folder or tune folder")
    p.add_argument("after", metavar="AFTER", nargs="?",
                   help="trace file or session folder (omit for a tune folder)")
    p.add_argument("--rank", type=int, default=None, metavar="N",
                   help="the rank to compare in a folder of several ranks (default: the first)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def tune_pair(folder: Path) -> tuple[Path, Path]:
    """(the trial of the script as written, the leader's trial) a tune folder's confirmed
    claim rests on (the median pair). A tune that confirmed no gain has no claim to compare:
    its unconfirmed leader's sessions are named, never compared as if they were the result."""
    from stallscope.core.tune import load_result

    result = load_result(folder)
    before, after = result.sessions
    if not result.confirmed:
        lead = result.leader_sessions
        also = (f"; its unconfirmed leader: stallscope-cli compare {lead[0]} {lead[1]}"
                if lead[0] and lead[1] else "")
        why = "" if result.outcome == "no gain" else f" ({result.outcome})"
        raise StallscopeError(f"{folder}: the tune confirmed no gain{why}: the script's "
                              f"settings stay, nothing to compare{also}")
    if not before or not after:
        raise StallscopeError(f"{folder}: the tune has no measured baseline and best trial")
    return Path(before), Path(after)


def load_report(path: Path, rank: int | None) -> tuple[Report, str]:
    from stallscope.core.document import load_document_job

    doc = run_job(load_document_job(path))
    if rank is None:
        return doc.reports[0], doc.labels[0] if len(doc.reports) > 1 else ""
    for report, label in zip(doc.reports, doc.labels, strict=True):
        if report.trace.rank == rank:
            return report, label
    raise StallscopeError(f"{path}: no rank {rank} (ranks: {', '.join(doc.labels)})")


def run(args: argparse.Namespace) -> int:
    before = Path(args.before)
    if args.after is None:
        if not (before / TUNE_JSON).is_file():
            raise StallscopeError(f"{before}: give two traces or sessions, or one tune folder "
                                  f"(it has no {TUNE_JSON})")
        before, after = tune_pair(before)
    else:
        after = Path(args.after)
    report_b, label_b = load_report(before, args.rank)
    report_a, label_a = load_report(after, args.rank)
    metrics = compare_reports(report_b, report_a)
    warnings = mismatch_warnings(report_b, report_a)
    gain, how = speedup(metrics), statistic(metrics)
    found = verdict(metrics, unlike(report_b, report_a))
    word, verdict_text = found.word, found.text
    if args.json:
        print(json.dumps({
            "before": str(before), "after": str(after), "warnings": warnings,
            "speedup": gain, "statistic": how, "verdict": word, "verdict_text": verdict_text,
            "metrics": [{"key": m.key, "label": m.label, "unit": m.unit, "before": m.before,
                         "after": m.after, "delta": m.delta, "rel": m.rel,
                         "verdict": m.verdict, "change": m.change_text()} for m in metrics],
        }, indent=2))
        return 0
    print(f"before: {before}" + (f" ({label_b})" if label_b else ""))
    print(f"after:  {after}" + (f" ({label_a})" if label_a else ""))
    for w in warnings:
        print(f"warning: {w}")
    print(f"verdict: {verdict_text}")
    if gain is not None:
        print(f"speed-up: {gain:.2f}x (step time: {how})")
    rows = [("metric", "before", "after", "change", "")]
    rows += [(m.label, m.value_text(m.before), m.value_text(m.after), m.change_text(),
              "" if m.verdict in ("n/a", "same") else m.verdict) for m in metrics]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in
                                                   zip(r[1:4], widths[1:4], strict=True)]
                        + [r[4]]).rstrip())
    sys.stdout.flush()
    return 0
