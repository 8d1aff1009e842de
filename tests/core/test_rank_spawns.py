"""Which of the processes a profiled script starts are ranks of its own job (issue 29): only
those are given the relaunch environment (core/capture/distributed.py, RankSpawns); the
hooks that decide it come off with the run. No process is started here (real processes:
tests/core/test_relaunch_env.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stallscope.core.capture.distributed import (
    RELAUNCH_DIR,
    RELAUNCH_ENV,
    RankSpawns,
    relaunch_children,
    script_run_by,
)
from stallscope.core.capture.options import parse_args

JOB = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}


@pytest.mark.parametrize("argv, script", [
    (["python", "train.py", "--lr", "1"], "train.py"),
    (["python3.11", "-u", "-B", "train.py"], "train.py"),
    (["python", "-W", "ignore", "-X", "dev", "train.py"], "train.py"),
    (["python", "-Wignore", "-Ximporttime", "train.py"], "train.py"),
    (["python", "-uW", "ignore", "train.py"], "train.py"),
    (["python", "--check-hash-based-pycs", "never", "train.py"], "train.py"),
    (["python", "--", "train.py"], "train.py"),
    (["python", "-c", "import train", "train.py"], None),
    (["python", "-Bc", "code", "train.py"], None),
    (["python", "-m", "train", "train.py"], None),
    (["python", "-mtrain"], None),
    (["python", "-", "train.py"], None),
    (["python", "-u"], None),
    (["python", "-E", "train.py"], None),  # ignores PYTHONPATH: never relaunched
    (["python", "-uI", "train.py"], None),
    (["python", "-S", "train.py"], None),  # no site, no sitecustomize
    (["python"], None),
])
def test_the_script_a_python_command_line_runs(argv, script):
    assert script_run_by(argv) == script


@pytest.fixture
def spawns(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    return RankSpawns(os.path.realpath(script), "/x/runner.py", ["--session", "s"]), script


def test_a_rank_is_the_script_run_by_python_with_a_jobs_rank(spawns, tmp_path):
    s, script = spawns
    assert s.is_rank([sys.executable, str(script)], env=JOB)
    assert s.is_rank(["/usr/bin/python3", "-u", str(script), "--fast"], env=JOB)
    assert s.is_rank([Path(sys.executable), script], env=JOB)  # path-like words
    assert s.is_rank([sys.executable.encode(), os.fsencode(script)], env=JOB)
    assert s.is_rank(["python", "train.py"], cwd=tmp_path, env=JOB)  # relative to its cwd
    assert s.is_rank(["launcher", str(script)], executable=sys.executable, env=JOB)
    assert s.is_rank([sys.executable, str(script)], env={**JOB, "RANK": "3", "LOCAL_RANK": "0"})


def test_everything_else_is_no_rank(spawns, tmp_path):
    s, script = spawns
    other = tmp_path / "other.py"
    other.write_text("")
    for key in JOB:  # each of the job's markers is needed
        assert not s.is_rank([sys.executable, str(script)], env={
            k: v for k, v in JOB.items() if k != key}), key
    assert not s.is_rank([sys.executable, str(script)], env={**JOB, "WORLD_SIZE": "1"})
    assert not s.is_rank([sys.executable, str(script)], env={**JOB, "LOCAL_RANK": "x"})
    assert not s.is_rank([sys.executable, str(script)], env={**JOB, "NODE_RANK": "1"})
    assert not s.is_rank([sys.executable, str(other)], env=JOB)  # another script
    assert not s.is_rank(["python", "train.py"], cwd=tmp_path / "elsewhere", env=JOB)
    assert not s.is_rank(["bash", str(script)], env=JOB)  # no Python
    assert not s.is_rank(["env", "python", str(script)], env=JOB)
    assert not s.is_rank([sys.executable, "-c", "pass", str(script)], env=JOB)
    assert not s.is_rank(f"{sys.executable} {script}", env=JOB)  # one word: a program's name
    assert not s.is_rank([], env=JOB)
    assert not s.is_rank([sys.executable, 3], env=JOB)
    assert not s.is_rank([sys.executable, str(script)], env={k.encode(): v.encode()
                                                            for k, v in JOB.items()})
    s.active = False  # the run is over
    assert not s.is_rank([sys.executable, str(script)], env=JOB)


def test_the_environment_given_is_kept_and_the_relaunch_added(spawns):
    s, _ = spawns
    given = {"PYTHONPATH": "/user/lib::/more", "A": "1"}
    env = s.environment(given)
    assert given == {"PYTHONPATH": "/user/lib::/more", "A": "1"}  # the caller's dict untouched
    assert env["PYTHONPATH"] == f"{RELAUNCH_DIR}{os.pathsep}/user/lib::/more"
    assert env["A"] == "1" and env[RELAUNCH_ENV] == s.spec
    assert s.environment(env) == env  # once only
    assert s.environment({})["PYTHONPATH"] == str(RELAUNCH_DIR)
    assert s.environment({"PYTHONPATH": ""})["PYTHONPATH"] == f"{RELAUNCH_DIR}{os.pathsep}"


def hooked() -> list:
    return [subprocess.Popen.__init__, os.posix_spawn, os.posix_spawnp, os.execv, os.execve]


def run_options(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    return parse_args(["--session", str(tmp_path / "s"), "--", str(script)]), script


def test_the_undo_takes_every_hook_off(tmp_path):
    before = hooked()
    opts, script = run_options(tmp_path)
    undo = relaunch_children(opts, tmp_path / "s", script, Path("/x/runner.py"))
    try:
        during = hooked()
        assert all(d is not b and d.__wrapped__ is b for d, b in zip(during, before, strict=True))
        assert RELAUNCH_ENV not in os.environ  # nothing exported to the script's process
        assert str(RELAUNCH_DIR) not in os.environ.get("PYTHONPATH", "")
    finally:
        undo()
    assert hooked() == before


def test_a_hook_laid_over_ours_is_left_in_place(tmp_path):
    before = subprocess.Popen.__init__
    opts, script = run_options(tmp_path)
    undo = relaunch_children(opts, tmp_path / "s", script, Path("/x/runner.py"))
    ours = subprocess.Popen.__init__

    def theirs(self, *args, **kwargs):
        return ours(self, *args, **kwargs)

    subprocess.Popen.__init__ = theirs  # type: ignore[method-assign]  # another tool's hook
    try:
        undo()
        assert subprocess.Popen.__init__ is theirs
    finally:
        subprocess.Popen.__init__ = before  # type: ignore[method-assign]
    assert ours.__wrapped__ is before
