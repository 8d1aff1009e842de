"""Line profiling from the runner: lineprof_capture.py, loaded by path from this folder."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from . import layout
from .exits import say

LINEPROF_MODULE = "stallscope_lineprof_capture"  # the name DataLoader workers import it under


def start_lineprof(opts: argparse.Namespace, session: Path, log):
    """Load lineprof_capture.py from this file's folder by path (stallscope need not be
    installed) and start it; it reports a missing line_profiler itself, with the install line."""
    if opts.lineprof == "off":
        return None

    def emit(record: dict) -> None:
        log.emit_dict(record)
        if record.get("event") in (layout.WARNING, layout.ERROR) and record.get("message"):
            say(str(record["message"]))

    path = Path(__file__).resolve().with_name("lineprof_capture.py")
    if not path.exists():
        emit({"event": layout.WARNING, "source": "lineprof",
              "message": f"line profiling is not available: {path} is missing"})
        return None
    try:
        module = sys.modules.get(LINEPROF_MODULE)
        if module is None:
            spec = importlib.util.spec_from_file_location(LINEPROF_MODULE, path)
            assert spec is not None and spec.loader is not None  # a .py file that exists
            module = importlib.util.module_from_spec(spec)
            sys.modules[LINEPROF_MODULE] = module
            spec.loader.exec_module(module)
        return module.start(opts.lineprof, opts.lineprof_depth, str(session / layout.LINEPROF),
                            emit)
    except Exception as exc:  # noqa: BLE001 - a bad target must not stop the run
        emit({"event": layout.WARNING, "source": "lineprof",
              "message": f"line profiling could not start for {opts.lineprof!r}: "
                         f"{type(exc).__name__}: {exc}"})
        return None


def finish_lineprof(capture, log) -> None:
    if capture is None:
        return
    try:
        path = capture.finish()
    except Exception as exc:  # noqa: BLE001
        log.emit(layout.ERROR, message=f"line profiling failed: {type(exc).__name__}: {exc}")
        return
    if path:
        p = Path(path).resolve()
        session = log.path.parent.resolve()
        inside = session == p or session in p.parents
        log.emit(layout.LINEPROF_READY, path=str(p.relative_to(session) if inside else p))
