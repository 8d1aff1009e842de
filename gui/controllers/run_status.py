"""What the run controller reads and says: the whole-run record of a session, and the status
lines of a run's start and end with their levels (the view gives each level its colour)."""

from __future__ import annotations

from pathlib import Path

from stallscope.core.capture import layout
from stallscope.core.errors import StallscopeError
from stallscope.core.session.events import Finished, Started
from stallscope.core.session.record import Record, read_record, record_path, with_events

# levels of sig_status / sig_console: the view gives each its colour
PLAIN, NOTE, ERROR = "", "note", "error"


def read_whole_run(session: Path, events: list[dict]) -> Record | None:
    """The session's record with its events (decoded lines); None when there is none yet, it
    holds no step, or it cannot be read."""
    path = record_path(session)
    if path is None:
        return None
    try:
        rec = with_events(read_record(path), events, layout.rank_of_file(path.name))
    except StallscopeError:
        return None
    return rec if rec.n_steps else None


def started_text(e: Started) -> str:
    device = ", ".join(e.devices) or "CPU only"
    text = f"Running · torch {e.torch or '?'} · {device} · {e.python or 'python'}"
    return text + (" · DataLoader: " + ", ".join(e.overrides) if e.overrides else "")


def finished_text(e: Finished) -> tuple[str, str]:
    """The status line of a finished record, and its level: plain for a clean end, error for
    a failed one, a note for the rest (a warning, an unknown code)."""
    text = f"Finished: {e.reason}" + (f" · {e.steps} steps" if e.steps is not None else "")
    text += f" · exit code {e.rc}"
    if e.exception is not None:
        text += f"\n{e.exception.text}"
    if e.warning:
        text += f"\n{e.warning}"
    ok = e.rc == 0 and not e.warning
    return text, PLAIN if ok else ERROR if e.rc not in (0, None) else NOTE
