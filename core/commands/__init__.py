"""CLI subcommands: each module defines `register(subparsers)` that adds its parser
and sets `func=run(args) -> int` as the default."""
