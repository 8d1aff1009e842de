"""A running (or ended) run, wherever it runs: typed events as they arrive, the script's output,
Stop, and the Ending. local.py and remote.py fill in how the process is watched.

Everything happens in the caller's thread, inside poll()/wait(): output callbacks, kills after
the grace period, closing the session. poll() never blocks."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from stallscope.core.capture.closing import close_run
from stallscope.core.launch.job import STOPPED_BY_USER, Ending
from stallscope.core.session.events import Event, Finished, TraceReady, typed
from stallscope.core.session.reader import EventFollower, read_events, resolve_path

Output = Callable[[bytes, bool], None]
WAIT_S = 0.05


class RunHandle:
    """One run. Subclasses implement `_advance()` (read output, check the process, finish a
    stop) and set `self._exit = (rc, reason)` once the runner is gone and, for a remote run,
    everything it wrote is on local disk."""

    local_pid: int | None = None
    remote_session: str | None = None

    def __init__(self, session: Path, on_output: Output | None = None) -> None:
        self.session = Path(session)
        self.on_output = on_output
        self.follower = EventFollower(self.session)
        self.ending: Ending | None = None
        self.stopping = False
        self.stop_reason = ""
        self._exit: tuple[int | None, str] | None = None
        self._pending: list[Event] = []
        self._held: list[TraceReady] = []  # announced, not yet complete on local disk

    # ------------------------------------------------------------------ public
    @property
    def running(self) -> bool:
        return self.ending is None

    def poll(self) -> list[Event]:
        """The typed events that arrived since the last poll (every rank); never blocks."""
        self._pump()
        out, self._pending = self._pending, []
        return out

    def wait(self, timeout: float | None = None) -> Ending | None:
        """Until the run has ended (None when `timeout` seconds passed first). Events keep
        queueing for the next poll()."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._pump()
            if self.ending is not None:
                return self.ending
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(WAIT_S)

    def stop(self, reason: str = STOPPED_BY_USER, grace: float | None = None) -> None:
        """The one stop rule: SIGTERM to the runner (it saves what it has and writes
        `finished`), after `grace` seconds (STOP_GRACE_S) SIGKILL to its process group and every
        descendant seen. `reason` is written when the runner could not write its own record.
        Non-blocking: poll()/wait() finish it."""
        if self.ending is not None or self.stopping:
            return
        self.stopping, self.stop_reason = True, reason
        self._stop(grace)

    def lost_line(self) -> str:
        """What to say when the connection to the run ended (a remote run goes on there)."""
        return self.ending.reason if self.ending is not None else ""

    # ------------------------------------------------------------------ for subclasses
    def _advance(self) -> None:
        raise NotImplementedError

    def _stop(self, grace: float | None) -> None:
        raise NotImplementedError

    def _output(self, data: bytes, is_err: bool) -> None:
        if data and self.on_output is not None:
            self.on_output(data, is_err)

    # ------------------------------------------------------------------ the loop
    def _pump(self) -> None:
        if self.ending is not None:
            return
        self._advance()
        self._follow()
        if self._exit is not None:
            self._finish(*self._exit)

    def _follow(self, final: bool = False) -> None:
        held, self._held = self._held, []
        for e in [*held, *map(typed, self.follower.poll())]:
            if isinstance(e, TraceReady):
                self._trace(e, final)
            else:
                self._pending.append(e)

    def _trace(self, e: TraceReady, final: bool) -> None:
        """Out once the trace is complete on local disk, its path made local (a trace that
        never arrived by the run's end never comes out)."""
        path = resolve_path(self.session, e.path) if e.path else None
        if path is not None and path.is_file():
            self._pending.append(replace(e, path=str(path)))
        elif not final:
            self._held.append(e)

    def _finish(self, rc: int | None, reason: str) -> None:
        if self.stopping:
            reason = self.stop_reason or reason
        written = close_run(self.session, rc, reason)
        self._follow(final=True)
        self.ending = ending_of(self.session, rc, reason, tuple(written))


def ending_of(session: Path, rc: int | None, reason: str, written: tuple[str, ...] = ()) -> Ending:
    """The Ending of a closed session: every events file's finished record (rank None for
    events.jsonl), and the reason they tell."""
    from stallscope.core.capture import layout
    from stallscope.core.capture.closing import events_files

    ranks: dict[int | None, Finished] = {}
    for path in events_files(session):
        try:
            records = read_events(path)
        except OSError:
            continue
        done = [typed(r) for r in records if r.get("event") == layout.FINISHED]
        if done and isinstance(done[-1], Finished):
            ranks[layout.rank_of_file(path.name)] = done[-1]
    if None in ranks:
        told = ranks[None].reason
    else:
        reasons = sorted({f.reason for f in ranks.values()})
        told = (reasons[0] if len(reasons) == 1 else
                "ranks ended differently: " + "; ".join(
                    f"rank {k}: {f.reason}" for k, f in sorted(ranks.items()))) if ranks else ""
    return Ending(rc, told or reason, ranks, written)
