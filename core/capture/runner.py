"""Run an unmodified training script under torch.profiler and write a session folder.

    python -m stallscope.core.capture.runner [options] -- script.py [args]
    python /path/to/capture/runner.py [options] -- script.py [args]

The capture/ folder needs only the standard library and torch (line_profiler when line
profiling), so the app can launch this file by path in the user's own interpreter where
stallscope is not installed; copy the whole folder to run it on another machine. Run by path, it
loads its siblings as the private package `_stallscope_capture` (never under a name the script
could import by accident). The folder's files, one job each:

    options.py        the command line          layout.py        the session folder's names
    writer.py         events.jsonl, run.json    tee.py           stdout.log
    stepping.py       step hooks                trace_writer.py  the trace files
    overrides.py      DataLoader --set, record  lineprof_glue.py line profiling
    processes.py      Stop, signals, leftovers  distributed.py   --nproc-per-node
    script.py         checks, its traceback     run.py           one run, start to `finished`
    record.py         the whole-run record      windows.py       repeated profiling windows
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__:
    from .options import (
        DEFAULT_SCHEDULE,
        add_run_options,
        build_argv,
        build_parser,
        default_session_dir,
        parse_args,
        split_argv,
    )
    from .run import main
else:  # run by file path: the folder becomes the private package _stallscope_capture
    import importlib.util

    _here = Path(__file__).resolve().parent
    if "_stallscope_capture" not in sys.modules:
        _spec = importlib.util.spec_from_file_location(
            "_stallscope_capture", _here / "__init__.py", submodule_search_locations=[str(_here)])
        assert _spec is not None and _spec.loader is not None  # a folder with __init__.py
        _package = importlib.util.module_from_spec(_spec)
        sys.modules["_stallscope_capture"] = _package
        _spec.loader.exec_module(_package)
    from _stallscope_capture.run import main  # type: ignore[no-redef]  # the same, by path

__all__ = ["DEFAULT_SCHEDULE", "add_run_options", "build_argv", "build_parser",
           "default_session_dir", "main", "parse_args", "split_argv"]

if __name__ == "__main__":
    sys.exit(main())
