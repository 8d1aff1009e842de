"""`stallscope-cli attach HOST:REMOTE_SESSION [--session LOCAL]`: follow a run on a remote host
again (after a dropped connection, a sleeping laptop, or from another terminal), fetching only
what the local copy lacks: its steps, traces and output arrive once, resumed by byte offset."""

from __future__ import annotations

import argparse
from pathlib import Path

from stallscope.core.capture import options as runner_options
from stallscope.core.commands.run import (
    Progress,
    _report,
    follow,
    say,
    terminal_output,
    where_of,
)
from stallscope.core.errors import StallscopeError
from stallscope.core.launch import attach

SUMMARY = "follow a run on a remote host again and fetch what is missing of its session"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "attach", help=SUMMARY, usage="stallscope-cli attach HOST:REMOTE_SESSION [options]",
        description="Follow a run started with `run --host` again (it keeps running when the "
                    "connection drops) and mirror its session: only what the local copy lacks "
                    "is fetched.")
    p.add_argument("target", metavar="HOST:REMOTE_SESSION",
                   help="the host and the remote session folder `run --host` printed")
    p.add_argument("--session", metavar="DIR",
                   help="the local copy (default: the sessions folder, the remote folder's name)")
    p.add_argument("--remote-python", metavar="PY",
                   help="the host's interpreter (default python3)")
    p.add_argument("--ssh-option", dest="ssh_options", action="append", default=[],
                   metavar="OPT", help="one more argument for ssh (repeatable)")
    p.add_argument("--remote-cache", metavar="DIR",
                   help="where the runner was deployed (default ~/.cache/stallscope)")
    p.add_argument("--analyze", action=argparse.BooleanOptionalAction, default=True,
                   help="print the analysis of the last trace at the end (default on)")
    p.set_defaults(func=run)


def split_target(target: str) -> tuple[str, str]:
    host, sep, remote = target.partition(":")
    if not sep or not host or not remote:
        raise StallscopeError(f"{target}: expected HOST:REMOTE_SESSION (as `run --host` "
                              f"printed it)")
    return host, remote


def run(args: argparse.Namespace) -> int:
    args.host, remote = split_target(args.target)
    args.remote_cwd = None
    where = where_of(args)
    name = Path(remote.rstrip("/")).name or "session"
    session = (Path(args.session).expanduser().resolve() if args.session
               else runner_options.sessions_root() / name)
    say(f"following {where.host}:{remote} into {session}")
    progress = Progress(str(where.host))
    handle = attach(where, remote, session, on_output=terminal_output(True, progress))
    ending = follow(handle, progress)
    if ending.lost:
        say(handle.lost_line())
    elif session.is_dir():
        _report(session, args.analyze)
    return ending.exit_status
