"""Runs first in every child Python of a stallscope run (the runner puts this folder first on
PYTHONPATH): a child that re-runs the user's script as one rank of a job the script launched
itself (Lightning's DDP launcher starts `python script.py args` with LOCAL_RANK and WORLD_SIZE
set) becomes that rank under the runner, by os.execv of the runner with the run's options
(STALLSCOPE_RELAUNCH). Every other child (DataLoader workers, helpers) goes on unchanged, and the
interpreter's own sitecustomize, if any, still runs. Standard library only, any Python 3.
"""

import json
import os
import sys

ENV = "STALLSCOPE_RELAUNCH"
RANK_OF = "STALLSCOPE_RANK_OF"


def rank_from_env(env):
    """This process's rank in a job of more than one process, or None."""
    try:
        if int(env.get("WORLD_SIZE", "1")) <= 1:
            return None
        if "RANK" in env:
            return int(env["RANK"])
        if env.get("NODE_RANK", "0") == "0" and "LOCAL_RANK" in env:
            return int(env["LOCAL_RANK"])  # one node: the local rank is the rank
    except ValueError:
        return None
    return None


def _relaunch():
    if os.name != "posix":
        return  # os.execv starts a new process there: the launcher would see this one end
    try:
        spec = json.loads(os.environ[ENV])
        script, runner, options = spec["script"], spec["runner"], list(spec["options"])
    except (KeyError, ValueError, TypeError):
        return
    argv = list(sys.argv)
    if not argv or not argv[0] or os.path.realpath(argv[0]) != script:
        return
    rank = rank_from_env(os.environ)
    if rank is None:
        return
    orig = list(getattr(sys, "orig_argv", []) or [])
    flags = orig[1:len(orig) - len(argv)] if len(orig) > len(argv) else []
    os.environ["RANK"] = str(rank)
    os.environ[RANK_OF] = str(spec.get("parent", ""))  # the launching runner waits for it
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *flags, runner, *options, "--", *argv])


def _chain():
    """Import the sitecustomize this one shadows, then leave sys.path as it would have been."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    me = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401 - the interpreter's own, run for its side effects
    except ImportError as exc:
        if exc.name != "sitecustomize":
            raise
    finally:
        if "sitecustomize" not in sys.modules and me is not None:
            sys.modules["sitecustomize"] = me  # the import system looks this name up after us


_relaunch()
_chain()
