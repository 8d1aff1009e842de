"""`stallscope-cli`: everything the app does to a trace, headless.

Each subcommand lives in core/commands/<name>.py and registers itself; errors derived from
StallscopeError print one line naming the file and the problem and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from stallscope.core import __version__
from stallscope.core.errors import StallscopeError

COMMANDS = ("analyze", "info", "run", "lineprof", "convert")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stallscope-cli", description="Why is my GPU waiting? Headless stallscope."
    )
    parser.add_argument("--version", action="version", version=f"stallscope {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__package__}.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except StallscopeError as exc:
        print(f"stallscope: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stallscope: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
