"""What the runner recorded of one trace's window, from its session's events: the steps it
ended (a step event each: those steps are whole) and how many it had ended when the trace was
written. The window's kind (core/analysis/window.py) reads this for a trace inside a session:
a ProfilerStep with a step event is a whole step, whatever its length; one without is the
profiler's span after the runner's last step (the script ended inside the window), or, with no
step at all, the whole script recorded under `--wait 0 --warmup 0`.

    facts = runner_window(trace_path)   # None outside a session, or a trace it never announced
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from stallscope.core.capture import layout
from stallscope.core.errors import StallscopeError
from stallscope.core.session.reader import read_events, resolve_path, session_of_trace

RANK_IN_NAME = re.compile(r"_rank(\d+)$")  # a rank's trace: <script>_rank3.<stamp>...


@dataclass(frozen=True)
class RunnerWindow:
    ended: frozenset[int]   # the step numbers with a step event (the trace's rank)
    steps_seen: int         # steps the runner had ended when it wrote the trace
    run_steps: int | None   # the runner's count for the whole run (None: not finished)

    def whole(self, step: int) -> bool:
        """Whether ProfilerStep#step is a step the runner ended."""
        return step in self.ended


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


def runner_window(trace_path: str | os.PathLike) -> RunnerWindow | None:
    """The runner's record of the window of the trace at `trace_path`; None when the trace is
    not in a session folder or its session never announced it (a `trace_ready` event). Reads
    the events file of the trace's rank (its name says which, `train_rank3.<stamp>...`) first,
    the others only when that one does not announce it."""
    folder = session_of_trace(trace_path)
    if folder is None:
        return None
    me = Path(trace_path).resolve()
    guess = RANK_IN_NAME.search(me.name.split(".")[0])
    first = folder / layout.events_name(int(guess.group(1)) if guess else None)
    try:
        files = sorted(folder.glob(layout.EVENT_GLOB), key=lambda p: p != first)
        for path in files:
            events = read_events(path)
            ready = [e for e in events if e.get("event") == layout.TRACE_READY
                     and isinstance(e.get("path"), str)
                     and resolve_path(folder, e["path"]).resolve() == me]
            if ready:
                return _window(events, ready[-1])
    except (StallscopeError, OSError):
        return None
    return None


def _window(events: list[dict], ready: dict) -> RunnerWindow:
    """The window `ready` announced, from the events of its file (its rank's)."""
    rank = ready.get("rank")
    seen = _count(ready.get("steps_seen"))
    ended = frozenset(e["n"] for e in events
                      if e.get("event") == layout.STEP and e.get("rank") == rank
                      and _count(e.get("n")) is not None)
    done = [e for e in events if e.get("event") == layout.FINISHED and e.get("rank") == rank]
    return RunnerWindow(ended, len(ended) if seen is None else seen,
                        _count(done[-1].get("steps")) if done else None)
