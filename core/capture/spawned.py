"""Processes the script starts with torch.multiprocessing.spawn / start_processes (and so
Lightning's ddp_spawn) are profiled as ranks, like torchrun's: process i runs its function
under the runner as rank i (events.rank<i>.jsonl, stdout.rank<i>.log, its own trace).

The function travels to the new process wrapped in a RankRun, which a spawned interpreter
unpickles by loading this folder by path as the private package _stallscope_capture (the
script's process may have loaded it under another name); there it runs the runner's one-run
code with the function as the script's body.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from pathlib import Path
from typing import Any

PACKAGE = "_stallscope_capture"
_BOOTSTRAP = (
    "exec(\"import importlib.util as u, sys\\n"
    "m = sys.modules.get(n)\\n"
    "if m is None:\\n"
    "    s = u.spec_from_file_location(n, d + '/__init__.py', submodule_search_locations=[d])\\n"
    "    m = u.module_from_spec(s)\\n"
    "    sys.modules[n] = m\\n"
    "    s.loader.exec_module(m)\\n"
    "import importlib\\n"
    "r = importlib.import_module(n + '.spawned').RankRun(*a)\\n\", g) or g['r']"
)


class RankRun:
    """fn(i, *args) of process i, run under the runner as rank i of `nprocs`."""

    def __init__(self, fn, argv: list[str], nprocs: int, folder: str | None = None) -> None:
        self.fn, self.argv, self.nprocs = fn, list(argv), int(nprocs)
        self.folder = folder or str(Path(__file__).resolve().parent)

    def __reduce__(self):
        g = {"n": PACKAGE, "d": self.folder, "a": (self.fn, self.argv, self.nprocs, self.folder)}
        return (eval, (_BOOTSTRAP, {"g": g}))

    def __call__(self, i: int, *args):
        # A spawned process enters the runner here, as runner.py does for a script: the runner
        # is the caller of this module's hook (run -> stepping -> spawned), so it is looked up
        # by name rather than imported as a dependency.
        run = importlib.import_module(f"{__package__}.run")
        from .options import parse_args

        for key, value in (("RANK", i), ("LOCAL_RANK", i), ("WORLD_SIZE", self.nprocs)):
            os.environ.setdefault(key, str(value))  # the runner names the rank's files by them
        raised: list[BaseException] = []

        def body(path, run_name=None):
            try:
                return self.fn(i, *args)
            except BaseException as exc:
                raised.append(exc)
                raise

        run.runpy = types.SimpleNamespace(run_path=body)  # type: ignore[attr-defined]  # this process's run is fn, not a file
        out = run.run_single(parse_args(self.argv))
        rc = out[0] if isinstance(out, tuple) else out
        error = raised[0] if raised else None
        if isinstance(error, Exception):
            raise error  # torch's spawn reports it to the parent as the rank's failure
        if rc:
            sys.exit(rc)


def hook_spawn(torch, stepper, argv: list[str]):
    """Wrap the function of every torch.multiprocessing start_processes/spawn call the
    script's process makes; returns the undo callable."""
    module: Any = sys.modules.get("torch.multiprocessing.spawn")  # patched below
    namespace: Any = getattr(torch, "multiprocessing", None)
    if module is None or not hasattr(module, "start_processes"):
        return lambda: None
    original = module.start_processes

    def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
        if stepper.mine() and not isinstance(fn, RankRun):
            fn = RankRun(fn, argv, nprocs)
            stepper.launched_ranks += int(nprocs)
        return original(fn, args, nprocs, join, daemon, start_method)

    start_processes.__wrapped__ = original  # type: ignore[attr-defined]  # the undo mark
    start_processes.__doc__ = original.__doc__
    module.start_processes = start_processes
    had = namespace is not None and getattr(namespace, "start_processes", None) is original
    if had:
        namespace.start_processes = start_processes

    def undo() -> None:
        module.start_processes = original
        if had:
            namespace.start_processes = original

    return undo
