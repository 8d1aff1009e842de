"""`stallscope-cli`: everything the app does to a trace, headless.

Each subcommand lives in core/commands/<name>.py and registers itself; errors derived from
StallscopeError print one line naming the file and the problem and exit with status 2.
A command line naming a subcommand imports that command's module only (start-up time).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from stallscope.core import __version__
from stallscope.core.commands import SUMMARIES
from stallscope.core.commands.terminal import escaped_output
from stallscope.core.errors import StallscopeError

COMMANDS = ("analyze", "info", "run", "tune", "compare", "lineprof", "convert", "verify",
            "check", "export", "attach")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with `only` that subcommand in full, or, without one, every subcommand
    listed by its summary (--help, --version, a typo) without importing any of them."""
    parser = argparse.ArgumentParser(
        prog="stallscope-cli", description="Why is my GPU waiting? Headless stallscope."
    )
    parser.add_argument("--version", action="version", version=f"stallscope {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        if only is None and name in SUMMARIES:
            sub.add_parser(name, help=SUMMARIES[name], add_help=False)
        else:
            importlib.import_module(f"{__package__}.commands.{name}").register(sub)
    return parser


def _command_in(argv: list[str]) -> str | None:
    """The subcommand an argument list names (its first word not an option), if it is one."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
        if arg in ("-h", "--help", "--version"):
            return None
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    with escaped_output():  # names from traces never reach the terminal raw
        return _main(argv)


def _main(argv: list[str]) -> int:
    args = build_parser(_command_in(argv)).parse_args(argv)
    from stallscope.core.commands.signals import Terminated, ended_by_signals  # not for --help

    try:
        with ended_by_signals():
            return int(args.func(args) or 0)
    except StallscopeError as exc:
        print(f"stallscope: error: {exc}", file=sys.stderr)
        return 2
    except Terminated as exc:
        print(f"stallscope: ended by {exc.name}", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print("stallscope: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
