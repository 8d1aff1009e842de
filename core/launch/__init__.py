"""One launcher: start the runner for a script here or on a host over SSH, follow its session
live, stop it with the one grace rule, and report how it ended, for every rank.

    from stallscope.core.launch import Where, Job, start, attach, Ending

    where = Where()                                   # this machine
    where = Where(host="gpu-box", python="~/envs/cuda/bin/python", cwd="~/proj",
                  ssh_options=("-F", "/tmp/t/ssh_config"))  # the user's own OpenSSH client
    job = Job(script="train.py", args=[...], options={...}, schedule={...}, env={...},
              session=Path(local_session_folder))
    run = start(where, job, on_output=lambda data, is_err: ...)  # returns at once
    run.poll()          # -> [Event]: typed events since the last poll, every rank; a TraceReady
                        #    only once its trace is complete on local disk (path: local, absolute)
    run.running         # bool
    run.stop()          # SIGTERM, after STOP_GRACE_S SIGKILL to the group and descendants
    run.wait(timeout)   # -> Ending | None
    run.ending          # Ending | None: rc, reason, every rank's finished record
    run.local_pid       # the local runner's pid (None for a remote run)
    run.remote_session  # the remote session folder (None locally)
    attach(where, remote_session, local_session)   # follow a remote run again (resume by offset)

on_output(data, is_err) gets the script's output as it is written (locally from its pipes;
remotely from the remote stdout.log, is_err False), always from poll()/wait() in the caller's
thread. Remote strings are untrusted: shown as plain text, never executed.
"""

from __future__ import annotations

from pathlib import Path

from stallscope.core.capture import layout
from stallscope.core.errors import StallscopeError
from stallscope.core.launch.handle import Output, RunHandle, ending_of
from stallscope.core.launch.job import (
    INTERRUPTED,
    STOP_GRACE_S,
    STOPPED_BY_USER,
    Ending,
    Job,
    Where,
)

__all__ = ["INTERRUPTED", "STOPPED_BY_USER", "STOP_GRACE_S", "Ending", "Job", "RunHandle",
           "Where", "attach", "ending_of", "start"]


def start(where: Where, job: Job, on_output: Output | None = None) -> RunHandle:
    """Start the runner for `job` at `where`; returns at once. A StallscopeError (one line)
    when it cannot start (no such interpreter, ssh refused), or when the session folder holds
    an earlier run (its files would mix with this run's)."""
    held = layout.earlier_run(job.session)
    if held is not None:
        raise StallscopeError(f"{job.session}: holds an earlier run ({held}); give a new "
                              "session folder (or move that one away)")
    if where.remote:
        from stallscope.core.launch.remote import RemoteRun

        return RemoteRun.start(where, job, on_output)
    from stallscope.core.launch.local import LocalRun

    return LocalRun(where, job, on_output)


def attach(where: Where, remote_session: str, local_session: Path,
           on_output: Output | None = None) -> RunHandle:
    """Follow a (possibly still running) remote run again, fetching only what the local mirror
    lacks."""
    from stallscope.core.launch.remote import RemoteRun

    return RemoteRun.attach(where, remote_session, Path(local_session), on_output)
