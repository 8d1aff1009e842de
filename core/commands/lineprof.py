"""`stallscope-cli lineprof SESSION|FILE.json|FILE.lprof [--json] [--trust-pickle]`: print the line
stats of a session's Dataset.__getitem__ as kernprof does (or as JSON)."""

from __future__ import annotations

import argparse
import sys

from stallscope.core import lineprof
from stallscope.core.render.facts import write_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "lineprof",
        help="line-by-line time of Dataset.__getitem__ (a session, its JSON, or a kernprof .lprof)",
        description="Print line stats recorded with `--lineprof` (or made by kernprof).",
        epilog="Record them with `stallscope-cli run --lineprof auto -- train.py`: the "
               "__getitem__ of the Dataset the DataLoader iterates. Helpers it calls show as "
               "their call line only; add --lineprof-depth 1 (or more) to profile them too, "
               "or name a function with --lineprof module:Class.method.",
    )
    p.add_argument("path", metavar="SESSION|FILE.json|FILE.lprof")
    p.add_argument("--json", action="store_true", help="print the stats as JSON")
    p.add_argument("--trust-pickle", action="store_true",
                   help="allow reading a .lprof file (a pickle: only files you made yourself)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    profiles = lineprof.load_any(args.path, trust_pickle=args.trust_pickle)
    matches = [lineprof.match_source(p) for p in profiles]
    if args.json:
        out = []
        for p, m in zip(profiles, matches, strict=True):
            obj = p.to_json()
            if m.warning:
                obj["warnings"] = [*obj["warnings"], m.warning]
            out.append(obj)
        write_json(out if len(out) > 1 else out[0], sys.stdout)
        return 0
    for i, (p, m) in enumerate(zip(profiles, matches, strict=True)):
        if i:
            sys.stdout.write("\n")
        sys.stdout.write(lineprof.format_table(p, m))
    return 0
