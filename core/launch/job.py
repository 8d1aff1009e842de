"""What a launch is given and what it reports: where the script runs, what runs, how it ended.

Plain data, no processes: core/launch/local.py and remote.py act on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from stallscope.core.session.events import Finished

STOP_GRACE_S = 5.0  # the one stop rule: SIGTERM, then after this SIGKILL to the group
# the one set of reasons a launcher writes into a `finished` record the runner could not write
STOPPED_BY_USER = "stopped by the user"
INTERRUPTED = "interrupted"


def killed_reason(signum: int) -> str:
    import signal

    try:
        return f"killed by {signal.Signals(signum).name}"
    except ValueError:
        return f"killed by signal {signum}"


def no_record_reason(rc: int | None) -> str:
    return f"runner ended with code {rc} without a finished record"


@dataclass(frozen=True)
class Where:
    """Where the script runs: this machine (host None) or a host reached with the user's own
    `ssh` (an alias of ~/.ssh/config works as in a terminal).

    python: the interpreter that runs the script (it needs torch, not stallscope); default this
    one locally, `python3` on a host. cwd: the script's working folder; default here, or the
    remote home. ssh_options: extra arguments for ssh, e.g. ("-F", "/path/ssh_config").
    cache: the remote folder the runner is deployed to (default ~/.cache/stallscope)."""

    host: str | None = None
    python: str | None = None
    cwd: str | None = None
    ssh_options: tuple[str, ...] = ()
    cache: str | None = None

    @property
    def remote(self) -> bool:
        return bool(self.host)

    @property
    def label(self) -> str:
        return self.host or "this computer"


@dataclass
class Job:
    """What runs: the script, its arguments, the runner options (as
    core/capture/options.build_argv takes them), extra environment, and the LOCAL session folder
    (for a remote run, the local mirror; the remote session sits under the remote cache unless
    remote_session names it)."""

    script: str
    args: list[str] = field(default_factory=list)
    options: dict = field(default_factory=dict)
    schedule: dict | None = None
    env: dict = field(default_factory=dict)
    session: Path = Path()
    remote_session: str | None = None


@dataclass(frozen=True)
class Ending:
    """How a run ended. rc: the runner's exit code (negative: the signal that killed it; None
    when it could not start). reason: the run's `finished` reason (the launcher's or single
    process's record, else what the ranks agree on). ranks: every events file's typed finished
    record, keyed by rank (None: events.jsonl). written: the records the launcher had to write
    (the runner could not: killed, crashed, never started). lost: the connection to a remote
    run ended before the run did; reason says how to follow it again."""

    rc: int | None
    reason: str
    ranks: dict[int | None, Finished] = field(default_factory=dict)
    written: tuple[str, ...] = ()
    lost: bool = False  # a remote run whose connection ended: it goes on there (attach)

    @property
    def exit_status(self) -> int:
        """The status a CLI exits with: rc, 128 + signal for a killed runner, 2 unstarted."""
        if self.lost or self.rc is None:
            return 2
        return self.rc if self.rc >= 0 else 128 - self.rc

    @property
    def finished(self) -> Finished | None:
        """The record that tells the run's end (the launcher's, else the first rank's)."""
        if None in self.ranks:
            return self.ranks[None]
        return self.ranks[min(self.ranks)] if self.ranks else None  # type: ignore[type-var]
