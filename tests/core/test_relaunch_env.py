"""No descendant of a profiled script sees stallscope's environment unless it is a rank (issue
29): a program the script starts (`env` by subprocess, os.system, os.posix_spawn, a fork that
execs, a bash that starts a Python) sees the user's environment exactly; only a child the
script starts as a rank of its own job gets the relaunch, and that rank, once it runs under
the runner, and all it starts see the user's environment again. Real processes under the real
runner; Lightning's DDP launcher and mp.spawn: tests/core/test_frameworks.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from runner_helpers import RUNNER, events, write_script

from stallscope.core.capture.distributed import RELAUNCH_DIR

pytestmark = pytest.mark.runner

# A Python's own view: its environment, the sitecustomize it imported and its sys.path.
REPORT = ("import json, os, sys; m = sys.modules.get('sitecustomize'); "
          "json.dump({'env': dict(os.environ), 'site': getattr(m, '__file__', None), "
          "'path': sys.path}, open(sys.argv[1], 'w'))")

CHILDREN = """
import os, subprocess, sys

out = sys.argv[1]
REPORT = {report!r}


def at(name):
    return os.path.join(out, name)


if os.environ.get("SELF_RERUN"):  # the script re-run by itself, not as a rank
    exec(REPORT.replace("sys.argv[1]", "at(os.environ['SELF_RERUN'])"))
    sys.exit(0)

with open(at("subprocess.env"), "wb") as f:
    subprocess.run(["env", "-0"], stdout=f, check=True)
assert os.system("env -0 > " + at("system.env")) == 0
pid = os.posix_spawnp("env", ["env", "-0"], os.environ, file_actions=[
    (os.POSIX_SPAWN_OPEN, 1, at("posix_spawn.env"), os.O_WRONLY | os.O_CREAT, 0o644)])
assert os.waitpid(pid, 0)[1] == 0
assert os.spawnv(os.P_WAIT, "/bin/sh", ["sh", "-c", "env -0 > " + at("spawnv.env")]) == 0
subprocess.run(["bash", "-c", 'env -0 > "$1" && "$2" -c "$3" "$4"', "bash", at("bash.env"),
                sys.executable, REPORT, at("bash_python.json")], check=True)
subprocess.run([sys.executable, "-c", REPORT, at("python.json")], check=True)
job = {{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29411", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}}
me = os.path.abspath(sys.argv[0])
# rank variables without a job's rendezvous: no rank
subprocess.run([sys.executable, me, out], check=True, env={{
    **os.environ, "SELF_RERUN": "no_job.json", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}})
# every marker of a rank, but started by a shell the script started: no rank
subprocess.run(["bash", "-c", '"$0" "$1" "$2"', sys.executable, me, out], check=True,
               env={{**os.environ, **job, "SELF_RERUN": "by_shell.json"}})
print("PARENT done", flush=True)
"""

RANKS = """
import os, subprocess, sys

out = sys.argv[1]
REPORT = {report!r}


def at(name):
    return os.path.join(out, name)


rank = os.environ.get("LOCAL_RANK")
if rank is not None:  # a rank of the job this script launched
    exec(REPORT.replace("sys.argv[1]", "at('rank' + rank + '.json')"))
    with open(at("rank" + rank + "_child.env"), "wb") as f:
        subprocess.run(["env", "-0"], stdout=f, check=True)
    sys.exit(0)

me = os.path.abspath(sys.argv[0])
job = {{**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29412", "WORLD_SIZE": "4"}}
# three ways to start a rank: subprocess (Lightning, torch elastic), posix_spawn, a fork + exec
first = subprocess.Popen([sys.executable, me, out], env={{**job, "LOCAL_RANK": "1"}})
second = os.posix_spawn(sys.executable, [sys.executable, "-u", me, out],
                        {{**job, "LOCAL_RANK": "2"}})
third = os.spawnve(os.P_NOWAIT, sys.executable, [sys.executable, me, out],
                   {{**job, "LOCAL_RANK": "3"}})
assert first.wait() == 0
assert os.waitpid(second, 0)[1] == 0 and os.waitpid(third, 0)[1] == 0
with open(at("parent_child.env"), "wb") as f:
    subprocess.run(["env", "-0"], stdout=f, check=True)
print("PARENT done", flush=True)
"""


def run_script(tmp_path: Path, source: str) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """The script under the runner by path, the user's PYTHONPATH set; returns (proc,
    session, the folder the script writes its reports in)."""
    script = write_script(tmp_path, source.format(report=REPORT))
    session, out, lib = tmp_path / "session", tmp_path / "out", tmp_path / "user lib"
    out.mkdir()
    lib.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STALLSCOPE_")}
    env["PYTHONPATH"] = str(lib)
    proc = subprocess.run([sys.executable, str(RUNNER), "--session", str(session), "--wait", "0",
                           "--warmup", "0", "--", str(script), str(out)], capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "PARENT done" in proc.stdout
    return proc, session, out


def environment(path: Path) -> dict:
    """An `env -0` dump."""
    pairs = [item.split(b"=", 1) for item in path.read_bytes().split(b"\0") if item]
    return {os.fsdecode(k): os.fsdecode(v) for k, v in pairs}


def assert_users(env: dict, lib: Path, who: str) -> None:
    assert [k for k in env if k.startswith("STALLSCOPE_")] == [], who
    assert env.get("PYTHONPATH") == str(lib), who
    assert str(RELAUNCH_DIR) not in json.dumps(env), who


def assert_users_python(report: dict, lib: Path, who: str) -> None:
    assert_users(report["env"], lib, who)
    assert report["site"] is None or Path(report["site"]).parent != RELAUNCH_DIR, who
    assert [p for p in report["path"] if Path(p or ".").resolve() == RELAUNCH_DIR] == [], who


def test_no_program_the_script_starts_sees_stallscopes_environment(tmp_path):
    _, session, out = run_script(tmp_path, CHILDREN)
    lib = tmp_path / "user lib"
    for name in ("subprocess", "system", "posix_spawn", "spawnv", "bash"):
        assert_users(environment(out / f"{name}.env"), lib, name)
    for name in ("bash_python", "python", "no_job", "by_shell"):
        assert_users_python(json.loads((out / f"{name}.json").read_text()), lib, name)
    assert not list(session.glob("events.rank*.jsonl"))  # none of them was a rank
    assert events(session)[-1]["rc"] == 0


def test_only_ranks_get_the_relaunch_and_they_hand_on_the_users_environment(tmp_path):
    _, session, out = run_script(tmp_path, RANKS)
    lib = tmp_path / "user lib"
    for rank in (1, 2, 3):
        fin = events(session, name=f"events.rank{rank}.jsonl")[-1]
        assert fin["event"] == "finished" and fin["rank"] == rank and fin["rc"] == 0, fin
        report = json.loads((out / f"rank{rank}.json").read_text())
        assert_users_python(report, lib, f"rank {rank}")
        assert report["env"]["RANK"] == str(rank)
        assert_users(environment(out / f"rank{rank}_child.env"), lib, f"rank {rank}'s child")
    assert_users(environment(out / "parent_child.env"), lib, "the script's child")
    fin = events(session)[-1]
    assert fin["event"] == "finished" and fin["rc"] == 0 and "rank" not in fin


SPAWNED = """
import os, subprocess, sys

import torch.multiprocessing as mp

REPORT = {report!r}


def work(i, out):
    sys.argv[1:] = [os.path.join(out, "spawned" + str(i) + ".json")]
    exec(REPORT)
    with open(os.path.join(out, "spawned" + str(i) + "_child.env"), "wb") as f:
        subprocess.run(["env", "-0"], stdout=f, check=True)


if __name__ == "__main__":
    mp.spawn(work, args=(sys.argv[1],), nprocs=2)
    print("PARENT done", flush=True)
"""


def test_mp_spawn_ranks_and_what_they_start_see_the_users_environment(tmp_path):
    _, session, out = run_script(tmp_path, SPAWNED)
    lib = tmp_path / "user lib"
    for rank in (0, 1):
        fin = events(session, name=f"events.rank{rank}.jsonl")[-1]
        assert fin["event"] == "finished" and fin["rank"] == rank, fin  # profiled as a rank
        report = json.loads((out / f"spawned{rank}.json").read_text())
        assert_users_python(report, lib, f"spawned rank {rank}")
        assert_users(environment(out / f"spawned{rank}_child.env"), lib, f"rank {rank}'s child")


UNWAITED = """
import os, subprocess, sys, time

if os.environ.get("LOCAL_RANK"):  # the rank: outlives the script that started it
    time.sleep(1.5)
    print("RANK done", flush=True)
    sys.exit(0)
job = {{**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29413", "WORLD_SIZE": "2",
        "LOCAL_RANK": "1"}}
subprocess.Popen([sys.executable, os.path.abspath(sys.argv[0]), sys.argv[1]], env=job)
print("PARENT done", flush=True)  # ends at once, before the rank has even started the runner
"""


def test_the_runner_waits_for_a_rank_the_script_did_not_wait_for(tmp_path):
    _, session, _ = run_script(tmp_path, UNWAITED)
    fin = events(session, name="events.rank1.jsonl")[-1]
    assert fin["event"] == "finished" and fin["rank"] == 1, fin
    assert fin["rc"] == 0 and fin["reason"] == "completed", fin
    assert "RANK done" in (session / "stdout.rank1.log").read_text()


# A child that blanks its own argument area, as /proc shows a process in the middle of an
# exec (its new memory mapped, its arguments not yet laid out): the sitecustomize's os.execv
# of the runner passes through that state, and a rank seen in it is still a rank.
BLANKED = """
import sys, time
stat = open("/proc/self/stat", "rb").read()
start, end = map(int, stat[stat.rfind(b")") + 2:].split()[45:47])
with open("/proc/self/mem", "r+b", buffering=0) as mem:
    mem.seek(start)
    mem.write(bytes(end - start))
print("blank", flush=True)
time.sleep(30)
"""


def test_a_rank_counts_as_running_until_it_has_ended(tmp_path):
    from stallscope.core.capture.distributed import RankSpawns

    spawns = RankSpawns(str(tmp_path / "train.py"), str(RUNNER), ["--session", "s"])
    sleep = [sys.executable, "-c", "import sys, time; print('up', flush=True); time.sleep(30)"]
    children = {
        "relaunched": subprocess.Popen(sleep, env=spawns.environment(None),
                                       stdout=subprocess.PIPE),
        "runner": subprocess.Popen([*sleep, str(RUNNER)], stdout=subprocess.PIPE),
        "between": subprocess.Popen([sys.executable, "-c", BLANKED], stdout=subprocess.PIPE),
        "other": subprocess.Popen(sleep, stdout=subprocess.PIPE),
    }
    try:
        for child in children.values():
            assert child.stdout.readline()  # started (and for "between": blanked)
            spawns.started(child.pid)
        running = {name for name, c in children.items() if c.pid in spawns.running()}
        assert running == {"relaunched", "runner", "between"}
        for child in children.values():
            child.kill()
        for child in children.values():
            os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # a zombie, not reaped
        assert spawns.running() == []
    finally:
        for child in children.values():
            child.kill()
            child.wait()
