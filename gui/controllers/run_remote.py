"""A remote run's pieces the run controller uses: where a mirrored session's run went on (its
run.json `remote`), and the launcher's start in a thread (ssh deploys the runner first)."""

from __future__ import annotations

from stallscope.core import launch
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
