"""A remote run's pieces the run controllers use: where a mirrored session's run went on (its
run.json `remote`), the local mirror of a remote session, and the launcher's start in a thread
(ssh deploys the runner first)."""

from __future__ import annotations

import json
from pathlib import Path

from stallscope.core import launch
from stallscope.core.capture import options as run_options
from stallscope.core.errors import StallscopeError
from stallscope.gui.dialogs.run_where import check_host
from stallscope.gui.run_request import ssh_env_options


def remote_of(run: dict) -> tuple[launch.Where, str] | None:
    """(where, remote session) of a mirrored session's run.json `remote`, or None. The
    session's strings are untrusted: a host that is no host name is never passed to ssh."""
    remote = run.get("remote")
    if not isinstance(remote, dict):
        return None
    host, session, python = (remote.get(k) for k in ("host", "session", "python"))
    if not (isinstance(host, str) and isinstance(session, str) and session):
        return None
    try:
        host = check_host(host)
    except ValueError:
        return None
    return launch.Where(host=host, python=python if isinstance(python, str) and python
                        else None, ssh_options=ssh_env_options()), session


def start_into(box: dict, where: launch.Where, job: launch.Job, on_output) -> None:
    """launch.start in a thread: the handle, or the one-line error, into `box`."""
    box["where"] = where
    try:
        box["handle"] = launch.start(where, job, on_output=on_output)
    except StallscopeError as exc:
        box["error"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - shown as one line, never a traceback
        box["error"] = f"could not start on {where.host}: {type(exc).__name__}: {exc}"


def mirror_of(host: str, remote_session: str, root: Path | None = None) -> Path:
    """The local mirror for a remote session: <sessions root>/<its name>, the same folder again
    when it mirrors that very run (attach resumes it), else a new name beside it."""
    root = root or run_options.sessions_root()
    name = Path(remote_session.rstrip("/")).name or "remote"
    path, n = root / name, 1
    while path.exists() and not _mirrors(path, host, remote_session):
        n += 1
        path = root / f"{name}-{n}"
    return path


def _mirrors(path: Path, host: str, remote_session: str) -> bool:
    try:
        remote = json.loads((path / "run.json").read_text(encoding="utf-8")).get("remote")
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(remote, dict) and remote.get("host") == host and \
        str(remote.get("session", "")).rstrip("/") == remote_session.rstrip("/")
