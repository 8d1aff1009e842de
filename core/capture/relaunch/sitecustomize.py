"""Runs first in a child Python that the profiled script's process started as one rank of a job
the script launched itself (Lightning's DDP launcher starts `python script.py args` with
LOCAL_RANK and WORLD_SIZE set): the runner's spawn hooks (core/capture/distributed.py,
RankSpawns) give such a child alone this folder first on PYTHONPATH and the run's options in
STALLSCOPE_RELAUNCH. It becomes that rank under the runner, by os.execv of the runner with the
run's options and the user's environment (this folder and STALLSCOPE_RELAUNCH taken out).

A second line of defence, should the environment reach another process: a rank is a DIRECT
child of the profiled script's process that runs the same script, with WORLD_SIZE > 1, its
rank, and the address of a distributed job (MASTER_ADDR and MASTER_PORT, as torchrun and
Lightning set them): a script that re-runs itself with rank variables but no job is not one.
Every other process has this folder and STALLSCOPE_RELAUNCH taken out of its environment at
once, so it and all it starts see the user's environment; the interpreter's own
sitecustomize, if any, still runs. Standard library only, any Python 3.
"""

import json
import os
import sys

ENV = "STALLSCOPE_RELAUNCH"


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


JOB = ("MASTER_ADDR", "MASTER_PORT")  # a distributed job's rendezvous (torchrun, Lightning)
HERE = os.path.dirname(os.path.abspath(__file__))


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
    if os.getppid() != spec.get("parent") or not all(os.environ.get(k) for k in JOB):
        return  # not launched by the profiled script as a rank of a distributed job
    rank = rank_from_env(os.environ)
    if rank is None:
        return
    orig = list(getattr(sys, "orig_argv", []) or [])
    flags = orig[1:len(orig) - len(argv)] if len(orig) > len(argv) else []
    os.environ["RANK"] = str(rank)
    _forget()  # the rank, and all it starts, see the user's environment
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *flags, runner, *options, "--", *argv])


def _forget():
    """Not a rank (or a rank about to become the runner): this process and what it starts get
    the user's environment back, PYTHONPATH exactly as the user had it."""
    path = os.environ.get("PYTHONPATH")
    if path is not None:
        parts = [p for p in path.split(os.pathsep) if not p or os.path.abspath(p) != HERE]
        if parts:
            os.environ["PYTHONPATH"] = os.pathsep.join(parts)
        else:
            os.environ.pop("PYTHONPATH")
    os.environ.pop(ENV, None)


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


_relaunch()  # returns only when this process is not a rank (a rank becomes the runner)
_forget()
_chain()
