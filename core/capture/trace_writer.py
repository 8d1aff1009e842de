"""The profiler's on_trace_ready: export, gzip under a temporary name, rename, announce."""

from __future__ import annotations

import gzip
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from . import layout
from .exits import say
from .windows import window_range

if TYPE_CHECKING:
    from torch.profiler import profile

    from .stepping import Stepper
    from .writer import EventLog


class TraceWriter:
    """on_trace_ready: export, gzip under a temporary name, rename, then announce."""

    def __init__(self, session: Path, script: Path, rank: int | None, log: EventLog) -> None:
        self.dir = session / layout.TRACES
        self.stem = layout.trace_stem(script.stem, rank)
        self.log = log
        self.paths: list[str] = []
        self.finishing = False
        self.stepper: Stepper | None = None
        # the profiler's schedule (torch's callable or Windows): which steps the window recorded
        self.schedule: Callable | None = None
        self.written_s = 0.0

    def window(self, hi: int | None) -> tuple[int, int] | None:
        """[first, last] step the trace recorded (hi: the step being ended)."""
        if hi is None or self.schedule is None:
            return None
        window_of = getattr(self.schedule, "window_of", None)
        if window_of is not None:
            w = window_of(hi)
            return (w[0], min(w[1], hi)) if w else (hi, hi)
        return window_range(self.schedule, hi)

    def __call__(self, prof: profile) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{int(time.time() * 1000) % 1000:03d}"
        final = self.dir / f"{self.stem}.{stamp}{layout.TRACE_SUFFIX}"
        n = 1
        while final.exists():  # windows close within the same millisecond
            n += 1
            final = self.dir / f"{self.stem}.{stamp}-{n}{layout.TRACE_SUFFIX}"
        raw = self.dir / f".{final.name}.json.part"
        packed = self.dir / f".{final.name}.part"
        t = time.perf_counter()
        try:
            prof.export_chrome_trace(str(raw))
            with open(raw, "rb") as src, gzip.open(packed, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.replace(packed, final)
        except Exception as exc:  # noqa: BLE001 - a failed export must not kill the user's run
            self.log.emit("error", message=f"could not write trace {final}: "
                          f"{type(exc).__name__}: {exc}")
            say(f"could not write trace {final}: {exc}")
            return
        finally:
            for part in (raw, packed):
                try:
                    part.unlink()
                except OSError:
                    pass
        rel = f"{layout.TRACES}/{final.name}"
        self.paths.append(rel)
        steps = self.stepper.steps if self.stepper else None
        window = self.window(steps)
        self.log.emit(layout.TRACE_READY, path=rel, bytes=final.stat().st_size,
                      complete=not self.finishing, steps_seen=steps,
                      write_s=round(time.perf_counter() - t, 3),
                      **({"window": list(window)} if window else {}))
        self.written_s += time.perf_counter() - t
        say(f"trace written: {final}" + ("" if not self.finishing else
                                           " (the script ended inside the profiling window)"))
