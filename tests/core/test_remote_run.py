"""Runs on a remote host over a real OpenSSH server on 127.0.0.1 (tests/sshd.py): the same
figures as a local run, arguments that reach the script exactly, a dropped connection that
`attach` recovers without a duplicate, Stop of the remote process group, and ssh's failures as
one line. The "host" is this machine, so a test can look at the remote side's files too."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from runner_helpers import DOUBLE_FORK, alive, finished, write_script
from scripts import training
from sshd import keygen

from stallscope.core import cli
from stallscope.core.errors import StallscopeError
from stallscope.core.launch import Job, Where, start
from stallscope.core.session.events import StepEvent
from stallscope.core.session.reader import open_session

pytestmark = pytest.mark.runner

ARGS = ["it's \"quoted\"", "two  spaces", "$(touch /tmp/stallscope-remote-pwned)", "a;b|c",
        "$HOME", "`id`"]


def where(server, tmp_path) -> Where:
    return Where(host=server.alias, python=sys.executable, ssh_options=server.options,
                 cache=str(tmp_path / "remote-cache"))


def steps_of(session: Path) -> list[int]:
    return [e["n"] for e in open_session(session).events if e.get("event") == "step"]


def test_a_remote_run_states_what_a_local_run_states(host, tmp_path, capfd):
    script = write_script(tmp_path, training(items=64, head="print(repr(sys.argv[1:]))"))
    common = ["--no-analyze", "--no-stop-after-window", "--wait", "1", "--warmup", "1",
              "--active", "2"]
    assert cli.main(["run", *common, "--session", str(tmp_path / "local"), "--",
                     str(script), *ARGS]) == 0
    local_out = capfd.readouterr()
    assert cli.main(["run", *host, *common, "--session", str(tmp_path / "mirror"), "--",
                     str(script), *ARGS]) == 0
    remote_out = capfd.readouterr()
    assert repr(ARGS) in local_out.out and repr(ARGS) in remote_out.out
    assert not Path("/tmp/stallscope-remote-pwned").exists()
    local, mirror = open_session(tmp_path / "local"), open_session(tmp_path / "mirror")
    assert steps_of(mirror.path) == steps_of(local.path) == list(range(8))
    assert len(mirror.traces()) == len(local.traces()) == 1
    assert mirror.end is not None and mirror.end.reason == local.end.reason == "completed"
    remote = mirror.run["remote"]
    assert remote["host"] == host[1] and remote["session"].startswith(str(tmp_path))
    # the mirror is byte for byte the remote session
    for name in ("events.jsonl", "stdout.log", "record.bin"):
        assert (mirror.path / name).read_bytes() == (Path(remote["session"]) / name).read_bytes()
    assert f"running on {host[1]}: {remote['session']}" in remote_out.err


def test_each_run_gets_a_folder_of_its_own_there(server, host, tmp_path, capfd):
    # Two local folders of one name (another tune's trial 01-as-written, a session folder
    # removed and made again): the runs went into one folder there, and the second mirror
    # held both runs (two `started`, the first run's output replayed, its end reported).
    script = write_script(tmp_path, training(items=64, head="print('run', sys.argv[1])"))
    for name in ("a", "b"):
        assert cli.main(["run", *host, "--no-analyze", "--session", str(tmp_path / name / "s"),
                         "--", str(script), name]) == 0
    a, b = open_session(tmp_path / "a" / "s"), open_session(tmp_path / "b" / "s")
    there = [Path(s.run["remote"]["session"]) for s in (a, b)]
    assert there[0] != there[1] and all(p.is_dir() for p in there)
    for name, mirror in (("a", a), ("b", b)):
        assert [e.get("event") for e in mirror.events].count("started") == 1
        assert len(mirror.traces()) == 1
        assert (mirror.path / "stdout.log").read_text().splitlines()[0] == f"run {name}"
    capfd.readouterr()
    # a folder there that exists is refused, never written into
    with pytest.raises(StallscopeError, match="exists already"):
        start(where(server, tmp_path), Job(script=str(script), session=tmp_path / "c",
                                           remote_session=str(there[1])))
    assert [e.get("event") for e in open_session(there[1]).events].count("started") == 1


def test_a_script_named_with_brackets_and_quotes_has_its_trace_here(host, tmp_path, capfd):
    # the trace took the script's name, which the mirror's name check refused: the run said
    # "trace written" and the local copy had no trace, without a word
    script = write_script(tmp_path, training(items=64), name="train (1) it's é.py")
    session = tmp_path / "m"
    assert cli.main(["run", *host, "--no-analyze", "--session", str(session), "--",
                     str(script)]) == 0
    traces = open_session(session).traces()
    assert [p.name.split(".")[0] for p in traces] == ["train__1__it_s_é"]
    remote = Path(open_session(session).run["remote"]["session"])
    assert [p.read_bytes() for p in traces] == [p.read_bytes()
                                                for p in open_session(remote).traces()]


def test_the_advice_on_a_remote_run_names_the_host(host, tmp_path, capfd):
    # its commands were local ones (`stallscope-cli run --set ... -- train.py`): pasted on
    # the laptop, they ran nothing or the wrong thing
    from stallscope.core.document import analyze_path

    script = write_script(tmp_path, training(items=96, item_s=0.01))
    session = tmp_path / "m"
    assert cli.main(["run", *host, "--no-analyze", "--remote-cwd", str(tmp_path),
                     "--session", str(session), "--", str(script)]) == 0
    report = analyze_path(open_session(session).traces()[-1])
    fix = next(a.fix for a in report.advice if "stallscope-cli run --host" in a.fix)
    place = f"--host {host[1]} --remote-python {sys.executable} --remote-cwd {tmp_path} "
    assert f"stallscope-cli run {place}--set script.py:" in fix, fix
    assert f"stallscope-cli tune {place}-- script.py" in fix, fix  # the script in its folder
    # and it runs as pasted: there
    command = shlex.split(fix.split("without editing the script: stallscope-cli ")[1]
                          .split(", or let")[0])
    capfd.readouterr()
    assert cli.main([*command[:1], "--no-analyze", "--session", str(tmp_path / "again"),
                     *command[1:]]) == 0, capfd.readouterr().err
    assert Path(open_session(tmp_path / "again").run["remote"]["session"]).is_dir()


def test_a_dropped_connection_loses_nothing_after_attach(server, host, tmp_path, capfd):
    script = write_script(tmp_path, training(items=48, step_s=0.25))  # 6 steps, ~2 s
    session = tmp_path / "mirror"
    run = start(where(server, tmp_path), Job(
        script=str(script), session=session, schedule={"wait": 1, "warmup": 1, "active": 1},
        options={"stop_after_window": False}))
    seen: list[StepEvent] = []
    while len(seen) < 2:
        seen += [e for e in run.poll() if isinstance(e, StepEvent)]
        time.sleep(0.05)
    os.kill(run.transport_pid, signal.SIGKILL)  # the laptop's ssh goes away
    ending = run.wait(30)
    assert ending is not None and ending.lost
    assert f"attach {server.alias}:{run.remote_session}" in ending.reason
    remote = Path(run.remote_session)
    while not (remote / ".runner.rc").exists():  # the script went on there
        time.sleep(0.1)
    assert steps_of(session) != steps_of(remote)
    # the line it printed works as pasted: the interpreter and the cache it ran with included
    words = shlex.split(ending.reason.split("the run goes on there: ")[1]
                        .removesuffix(" follows it again"))
    assert words[:2] == ["stallscope-cli", "attach"] and "--remote-python" in words
    rc = cli.main([*words[1:], "--session", str(session), "--no-analyze"])
    assert rc == 0, capfd.readouterr().err
    assert steps_of(session) == list(range(6))  # each step once
    traces = open_session(session).traces()
    assert [p.name for p in traces] == [p.name for p in open_session(remote).traces()]
    assert [p.read_bytes() for p in traces] == [(remote / "traces" / p.name).read_bytes()
                                                for p in traces]
    for name in ("events.jsonl", "stdout.log", "record.bin", ".runner.out"):
        assert (session / name).read_bytes() == (remote / name).read_bytes(), name


def test_attach_to_a_wrong_folder_says_so_and_makes_nothing_here(host, tmp_path, capfd):
    # attach ran an agent it never deployed (a new cache, another stallscope version): ssh
    # failed and it said "the connection ended; the run goes on there" for a run that never
    # was; it also left an empty local folder
    session = tmp_path / "here"
    rc = cli.main(["attach", f"{host[1]}:{tmp_path / 'no-such-run'}", "--session", str(session),
                   "--remote-python", sys.executable, "--remote-cache", str(tmp_path / "new")])
    err = capfd.readouterr().err
    assert rc == 2 and f"no session folder {tmp_path / 'no-such-run'}" in err, err
    assert "goes on there" not in err and not session.exists()


def test_stop_ends_the_remote_process_group(server, tmp_path):
    script = write_script(tmp_path, training(forever=True, loader="num_workers=2",
                                             step_s=0.02))
    run = start(where(server, tmp_path), Job(script=str(script), session=tmp_path / "m",
                                             options={"stop_after_window": False}))
    while not any(isinstance(e, StepEvent) for e in run.poll()):
        assert run.running
        time.sleep(0.05)
    pid = int((Path(run.remote_session) / ".runner.pid").read_text())
    tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    assert len(tree) >= 3  # the runner and its two workers
    run.stop()
    ending = run.wait(60)
    assert ending is not None and not ending.lost
    assert ending.rc == 128 + signal.SIGTERM and ending.reason == "stopped by SIGTERM"
    assert not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert json.loads((tmp_path / "m" / "run.json").read_text())["remote"]["host"]


def cli_in_a_terminal_group(host: list[str], session: Path, script: Path, env=None):
    """`stallscope-cli run --host ...` as a terminal starts it: a process group of its own, so
    a Ctrl-C (SIGINT to the whole group) reaches it and whatever it started in the group."""
    return subprocess.Popen([sys.executable, "-m", "stallscope.core.cli", "run", *host,
                             "--no-analyze", "--no-stop-after-window", "--session",
                             str(session), "--", str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)


def stopped_there(session: Path, err: str) -> None:
    """A run ended by the Ctrl-C, on both sides: the remote folder the CLI named, a finished
    record there and in the mirror, the remote runner gone."""
    line = next(x for x in err.splitlines() if x.startswith("stallscope: running on "))
    remote = Path(line.split(": ", 2)[2].split("; local copy ")[0])
    for folder in (session, remote):
        assert finished(folder)["reason"] in ("stopped by SIGTERM", "interrupted"), folder
    pid = int((remote / ".runner.pid").read_text())
    assert pid == 0 or not alive(pid)  # 0: it never started


def test_a_terminal_s_ctrl_c_stops_the_remote_run(host, tmp_path):
    # ssh was in the CLI's process group: the Ctrl-C killed it with the CLI's, so the remote
    # run stopped while the CLI said "the connection ... ended; the run goes on there"
    script = write_script(tmp_path, training(forever=True, step_s=0.05))
    session = tmp_path / "m"
    proc = cli_in_a_terminal_group(host, session, script, env=os.environ)
    while not (session / "events.jsonl").exists() or \
            '"step"' not in (session / "events.jsonl").read_text():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert "the run goes on there" not in err and proc.returncode != 2, err
    stopped_there(session, err)
    assert f"session {session}:" in err  # the summary of a run that ended
    # passed on as a local run's Ctrl-C is: the script's KeyboardInterrupt, exit 130
    assert finished(session)["reason"] == "interrupted" and proc.returncode == 130, err


def test_a_ctrl_c_while_the_run_starts_stops_it_there(host, tmp_path):
    # A Ctrl-C during the start's ssh cut it short: the runner started there anyway, with no
    # "running on" line, no local folder and nothing to stop it. The host's interpreter is
    # made slow to start (a wrapper that sleeps), so the Ctrl-C lands in that ssh every time.
    mark = tmp_path / "starting"
    slow = tmp_path / "slow-python"
    slow.write_text(f"#!/bin/sh\nif [ \"$2\" = start ]; then touch {mark}; fi\n"
                    f"sleep 1\nexec {sys.executable} \"$@\"\n")
    slow.chmod(0o755)
    script = write_script(tmp_path, training(forever=True, step_s=0.05))
    session = tmp_path / "m"
    options = [*host[:host.index("--remote-python")], "--remote-python", str(slow),
               *host[host.index("--remote-python") + 2:]]
    proc = cli_in_a_terminal_group(options, session, script, env=os.environ)
    while not mark.exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode != 2, err
    stopped_there(session, err)


def test_a_daemon_a_remote_script_double_forks_is_ended_with_the_run(host, tmp_path, capfd):
    script = write_script(tmp_path, DOUBLE_FORK)
    assert cli.main(["run", *host, "--no-analyze", "--session", str(tmp_path / "mirror"), "--",
                     str(script)]) == 0
    daemon = int((tmp_path / "daemon.pid").read_text())
    try:
        assert [p["pid"] for p in finished(tmp_path / "mirror")["left_running"]] == [daemon]
        assert not alive(daemon)  # the remote runner ended it before writing `finished`
    finally:
        if alive(daemon):
            os.kill(daemon, signal.SIGKILL)


@pytest.mark.parametrize("case", ["unknown host", "refused key", "unknown host key"])
def test_ssh_failures_are_one_line_exit_2(server, host, tmp_path, capfd, monkeypatch, case):
    script = write_script(tmp_path, "print(1)\n")
    if case == "unknown host":
        host[1] = "no-such-host.invalid"
        expect = "host no-such-host.invalid not found"
    elif case == "refused key":
        keygen(tmp_path / "other_key")
        monkeypatch.setenv("STALLSCOPE_SSH_CONFIG", str(server.ssh_config(
            "refused", IdentityFile=str(tmp_path / "other_key"))))
        expect = f"{server.alias} refused the login: set up a key"
    else:
        (tmp_path / "empty_known_hosts").write_text("")
        monkeypatch.setenv("STALLSCOPE_SSH_CONFIG", str(server.ssh_config(
            "unknown", UserKnownHostsFile=str(tmp_path / "empty_known_hosts"))))
        expect = f"run `ssh {server.alias}` once to accept it"
    rc = cli.main(["run", *host, "--", str(script)])
    err = capfd.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("stallscope: error: "), err
    assert expect in err[0] and "(ssh: " in err[0]


@pytest.mark.parametrize("case", ["no such folder", "an interpreter that fails",
                                  "an interpreter that is a folder"])
def test_a_wrong_folder_or_interpreter_there_is_named(host, tmp_path, capfd, case):
    # a missing --remote-cwd read "cannot start the interpreter ...: No such file or
    # directory" after a run line and a session of 0 steps; /bin/false read "on HOST (ssh:
    # exit code 1)", with nothing to say what to do
    script = write_script(tmp_path, "print(1)\n")
    python = host.index("--remote-python") + 1
    if case == "no such folder":
        host += ["--remote-cwd", str(tmp_path / "no-such-folder")]
        expect = f"{tmp_path / 'no-such-folder'} is not a folder there (--remote-cwd)"
    elif case == "an interpreter that fails":
        host[python] = "/bin/false"
        expect = "the interpreter failed (exit code 1); give --remote-python"
    else:
        host[python] = str(tmp_path)
        expect = "give --remote-python"
    session = tmp_path / "m"
    rc = cli.main(["run", *host, "--session", str(session), "--", str(script)])
    err = capfd.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("stallscope: error: "), err
    assert expect in err[0] and "(ssh: " not in err[0] and "Traceback" not in err[0], err
    assert not session.exists()
    assert not list((tmp_path / "remote-cache").glob("sessions/*"))


def test_torchrun_and_line_stats_on_a_host(host, tmp_path, capfd):
    """--nproc-per-node 2 runs torchrun there; every rank's files, traces and line stats come
    back, each rank ending with its record."""
    script = write_script(tmp_path, training(items=64, item_s=0.002), "train.py")
    rc = cli.main(["run", *host, "--nproc-per-node", "2", "--lineprof", "auto", "--no-analyze",
                   "--session", str(tmp_path / "m"), "--", str(script)])
    assert rc == 0, capfd.readouterr().err
    s = open_session(tmp_path / "m")
    assert sorted(p.name.split(".")[0] for p in s.traces()) == ["train_rank0", "train_rank1"]
    assert sorted(p.name for p in (s.path / "lineprof").iterdir()) == [
        "Slow.__getitem__.rank0.json", "Slow.__getitem__.rank1.json"]
    for rank in (0, 1):
        done = [e for e in s.events if e.get("event") == "finished" and e.get("rank") == rank]
        assert len(done) == 1 and done[0]["rc"] == 0
