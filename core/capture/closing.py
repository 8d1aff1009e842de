"""Closing a run the runner could not close (killed, crashed, never started): a `finished`
record in every events file that lacks one, once. Standard library only: the remote agent
(remote_agent.py) closes a remote run with it on the remote disk, the local launcher
(core/launch) a local one.

A run's events files: events.jsonl (the runner, or torchrun's launcher) and events.rank<N>.jsonl
(every rank). A run whose only files are rank files (a script that launched its own ranks: the
runner became rank 0) is closed when every rank file holds its record; nothing is added then.
"""

from __future__ import annotations

from pathlib import Path

from . import layout

WRITTEN_BY = "stallscope launcher"


def events_files(session: Path) -> list[Path]:
    return sorted(p for p in Path(session).glob(layout.EVENT_GLOB) if p.is_file())


def close_run(session: str | Path, rc: int | None, reason: str) -> list[str]:
    """Append `finished` (rc, reason) to each events file of `session` that has none; the
    names of the files written. A missing session folder stays missing."""
    session = Path(session)
    if not session.is_dir():
        return []
    files = events_files(session)
    ranks = [p for p in files if layout.rank_of_file(p.name) is not None]
    top = session / layout.EVENTS
    targets = ([top] if top in files or not ranks else []) + ranks
    written = []
    for path in targets:
        rank = layout.rank_of_file(path.name)
        if layout.append_finished(path, rc, reason, rank, written_by=WRITTEN_BY):
            written.append(path.name)
    if written and not (session / layout.STDOUT_LOG).exists() and not ranks:
        (session / layout.STDOUT_LOG).touch()
    return written
