"""`stallscope-cli verify DST`: every record of an LMDB against its crc32 (no source needed),
and random samples against the source when it is still there."""

from __future__ import annotations

import argparse
import sys

from stallscope.core.commands.convert import Progress, print_verify, verify_json
from stallscope.core.jobs import run_job
from stallscope.core.render.facts import write_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "verify",
        help="check a converted LMDB: every record's checksum, and random samples against "
             "the source",
        description=(
            "Check every record of the LMDB at DST against the crc32 written at conversion "
            "(needs no source), list damaged records, then re-decode N random source samples "
            "(different ones each run: the seed is printed) when the source is still there. "
            "Exit status 1 when anything differs."
        ),
    )  # fmt: skip
    p.add_argument("dst", metavar="DST", help="a stallscope LMDB folder")
    p.add_argument("--samples", type=int, default=64, metavar="N",
                   help="random source samples to re-decode (0: checksums only)")  # fmt: skip
    p.add_argument("--seed", type=int, default=None, help="repeat a run's choice of samples")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from stallscope.core.lmdb.handles import TruncatedError
    from stallscope.core.lmdb.verify import verify

    progress = Progress("verifying")
    try:
        check = run_job(verify(args.dst, n=max(0, args.samples), seed=args.seed, records=True),
                        progress)
    except TruncatedError as exc:  # damage verify is there to find: said, exit status 1
        progress.end()
        if args.json:
            write_json({"ok": False, "problem": str(exc), "truncated": True}, sys.stdout)
        else:
            print(f"verify: {exc}")
        return 1
    progress.end()
    if args.json:
        write_json(verify_json(check), sys.stdout)
    else:
        print_verify(check)
    return 1 if check.damaged or check.mismatches else 0
