"""The remote end of a run (core/capture/remote_agent.py) without ssh: loaded by the oldest
Python here (the host's interpreter may be older than the app's), its follow stream framed
and ordered, and a missing interpreter closed as a run that never started."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_helpers import frames

from stallscope.core.capture import layout, remote_agent
from stallscope.core.launch import ending_of

pytestmark = pytest.mark.runner

AGENT = Path(remote_agent.__file__).resolve()
RUNNER = AGENT.with_name("runner.py")


def oldest_python() -> str:
    found = sorted(Path("/usr/bin").glob("python3.[0-9]*"),
                   key=lambda p: tuple(int(x) for x in p.name[len("python"):].split(".")
                                       if x.isdigit()))
    found = [p for p in found if p.name.replace("python", "").replace(".", "").isdigit()]
    return str(found[0]) if found else sys.executable


def test_the_oldest_python_here_loads_the_runner_and_the_agent():
    python = oldest_python()
    for argv in ([str(RUNNER), "--help"], [str(AGENT), "--help"]):
        proc = subprocess.run([python, *argv], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and "usage:" in proc.stdout, (python, proc.stderr)


def test_follow_sends_each_byte_once_and_traces_before_their_events(tmp_path):
    session = tmp_path / "s"
    (session / "traces").mkdir(parents=True)
    (session / "traces" / "t.pt.trace.json.gz").write_bytes(b"\x1f\x8b" + b"x" * 5000)
    (session / "traces" / ".t.part").write_bytes(b"temporary")  # never sent
    events = session / layout.EVENTS
    events.write_bytes(layout.encode(layout.record(layout.STEP, n=0)))
    events.open("ab").write(layout.encode(layout.record(layout.TRACE_READY,
                                                        path="traces/t.pt.trace.json.gz")))
    (session / layout.RUN_JSON).write_text('{"script": "x.py"}')
    (session / remote_agent.RC_FILE).write_text("0")
    first = 10  # as after a dropped connection: the first 10 bytes of events.jsonl are here
    proc = subprocess.run([oldest_python(), str(AGENT), "follow", "--session", str(session),
                           "--offsets", json.dumps({"events.jsonl": first})],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = frames(proc.stdout)
    names = [h.get("f") for h, _ in got]
    assert names == ["run.json", "traces/t.pt.trace.json.gz", "events.jsonl", None]
    assert got[-1][0] == {"done": 0}
    header, data = got[2]
    assert header["o"] == first and data == events.read_bytes()[first:]
    assert got[0][0]["w"] == 1 and got[1][1] == (session / "traces" /
                                                 "t.pt.trace.json.gz").read_bytes()


def test_an_interpreter_missing_on_the_host_closes_the_run(tmp_path):
    session = tmp_path / "s"
    proc = subprocess.run([sys.executable, str(AGENT), "start", "--session", str(session),
                           "--", "/nonexistent/python3", "--session", str(session), "--",
                           "train.py"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    deadline = time.monotonic() + 30
    while not (session / remote_agent.RC_FILE).exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    ending = ending_of(session, None, "")
    assert ending.reason.startswith("cannot start the interpreter /nonexistent/python3")
    assert "cannot start the interpreter" in (session / remote_agent.OUT_FILE).read_text()


def test_the_mirror_writes_only_names_a_session_holds(tmp_path):
    """Remote bytes are untrusted: a frame naming a path outside the session layout is
    dropped, never written."""
    from stallscope.core.launch import Where
    from stallscope.core.launch.remote import RemoteRun

    session = tmp_path / "mirror"
    session.mkdir()
    run = RemoteRun(Where(host="h"), session, "/remote/s", None)
    for name in ("../escaped", "/tmp/abs", "traces/../../escaped", ".", "..", "a/b",
                 "lineprof/../../x", "traces/", "bad\nname", "x" * 300):
        run._write({"f": name, "o": 0, "n": 1}, b"x")
        run._write({"f": name, "w": 1, "n": 1}, b"x")
    run._write({"f": "traces/ok.pt.trace.json.gz", "o": 0, "n": 2}, b"ok")
    run._write({"f": "events.jsonl", "o": 0, "n": 3}, b"ab\n")
    run._write({"f": "events.jsonl", "o": 2, "n": 4}, b"\ncd\n")  # resumes at its offset
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["mirror/events.jsonl", "mirror/traces/ok.pt.trace.json.gz"]
    assert (session / "events.jsonl").read_bytes() == b"ab\ncd\n"
