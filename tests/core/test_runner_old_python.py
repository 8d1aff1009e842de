"""The runner (core/capture) and the remote agent on the oldest Python here: a remote GPU box's
interpreter may be older than the app's (README "Remote GPU box": 3.8 and up). The old
interpreter has no torch: it loads every capture module by file path as the runner does, gives
the same answers as the app's Python where no torch is needed, says in one line that torch is
missing, and as the remote agent starts, streams and stops a real run of the app's Python."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_helpers import TRAIN, events, frames, write_script

from stallscope.core.capture import remote_agent

pytestmark = pytest.mark.runner

CAPTURE = Path(remote_agent.__file__).resolve().parent
AGENT = CAPTURE / "remote_agent.py"
RUNNER = CAPTURE / "runner.py"
FLOOR = (3, 8)  # the oldest Python the runner supports (README)


def _version(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30).stdout.split()
        return int(out[0]), int(out[1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def oldest_python() -> tuple[str, tuple[int, int]] | None:
    """The oldest interpreter at or above FLOOR: pyenv's versions, then python3.X on PATH."""
    roots = {Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser(), Path("/root/.pyenv")}
    found = [p / "bin" / "python3" for root in roots if (root / "versions").is_dir()
             for p in sorted((root / "versions").iterdir())]
    found += [Path(w) for minor in range(FLOOR[1], 14) if (w := shutil.which(f"python3.{minor}"))]
    versions = {str(p): _version(str(p)) for p in found if os.access(p, os.X_OK)}
    usable = sorted((v, p) for p, v in versions.items() if v and v >= FLOOR)
    return (usable[0][1], usable[0][0]) if usable else None


@pytest.fixture(scope="module")
def old_python() -> str:
    found = oldest_python()
    if found is None or found[1] >= (3, 10):
        why = (f"no Python older than 3.10 here (oldest: {found[1] if found else 'none'}); "
               "install one with pyenv to test the remote runner's floor")
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return found[0]


# Runs under both interpreters; what it prints must be the same.
PROBE = r'''
import importlib, importlib.util, json, os, subprocess, sys
here = sys.argv[1]
spec = importlib.util.spec_from_file_location(
    "_stallscope_capture", os.path.join(here, "__init__.py"), submodule_search_locations=[here])
package = importlib.util.module_from_spec(spec)
sys.modules["_stallscope_capture"] = package
spec.loader.exec_module(package)
names = sorted(n[:-3] for n in os.listdir(here) if n.endswith(".py") and n != "__init__.py")
mods = {n: importlib.import_module("_stallscope_capture." + n) for n in names}
spec = importlib.util.spec_from_file_location("sitecustomize_probe",
                                              os.path.join(here, "relaunch", "sitecustomize.py"))
spec.loader.exec_module(importlib.util.module_from_spec(spec))
o, ov, w, lay, rec = (mods[n] for n in ("options", "overrides", "writer", "layout", "record"))
opts = o.parse_args(["--no-profile-memory", "--with-stack", "--set", "2:num_workers=4",
                     "--", "train.py", "--lr", "1"])
sets = ov.parse_sets(["num_workers=2", "./src/train.py:12:pin_memory=off"])
rows = [tuple(i * (j + 1) if code in "IHB" else 0.5 * i + j
              for j, (_, code) in enumerate(rec.STEP_FIELDS)) for i in range(5)]
done = os.path.join(sys.argv[2], "events.jsonl")
lay.append_finished(done, 0, "ok")
print(json.dumps({
    "modules": names,
    "torch_imported": "torch" in sys.modules,
    "options": {k: v for k, v in sorted(vars(opts).items()) if isinstance(v, (bool, int, str))},
    "sets": [s.text for s in sets],
    "same_file": [ov.same_file("./src/train.py", "/home/me/src/train.py"),
                  ov.same_file("src/train.py", "/home/me/other/train.py")],
    "jsonable": ov.jsonable([1, 2.5, True, None, "x" * 300, (3, 4), print]),
    "capped": w.capped({"a": [1, ("b", 2)], "t": "y" * 100000})["a"],
    "record_name": [lay.record_name(None), lay.record_name(3)],
    "finished": lay.has_finished(done),
    "block": rec.summarize(rows).hex(),
    "float": [rec._f(3), rec._f(True), rec._f("x") == rec._f("x")],
    "contain_rc": subprocess.run([sys.executable, os.path.join(here, "contain.py"), "--",
                                  sys.executable, "-c", "raise SystemExit(7)"]).returncode,
}, sort_keys=True))
'''


def test_every_capture_module_loads_and_answers_as_on_the_apps_python(old_python, tmp_path):
    answers = []
    for python in (old_python, sys.executable):
        work = tmp_path / Path(python).parent.parent.name
        work.mkdir()
        proc = subprocess.run([python, "-c", PROBE, str(CAPTURE), str(work)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, (python, proc.stderr[-3000:])
        answers.append(json.loads(proc.stdout))
    old, new = answers
    assert old == new
    assert "runner" in old["modules"] and "remote_agent" in old["modules"]
    assert old["torch_imported"] is False  # torch is imported when a run starts, not before
    assert old["options"]["profile_memory"] is False and old["options"]["with_stack"] is True
    assert old["sets"] == ["num_workers=2", "./src/train.py:12:pin_memory=false"]
    assert old["same_file"] == [True, False] and old["contain_rc"] == 7 and old["finished"]


def test_the_old_python_runs_the_runner_by_path_and_names_the_missing_torch(old_python, tmp_path):
    if _version(old_python) and subprocess.run([old_python, "-c", "import torch"],
                                               capture_output=True).returncode == 0:
        pytest.skip(f"{old_python} has torch: the missing-torch line cannot be seen")
    helped = subprocess.run([old_python, str(RUNNER), "--help"], capture_output=True,
                            text=True, timeout=60)
    assert helped.returncode == 0 and "--no-profile-memory" in helped.stdout, helped.stderr
    script = write_script(tmp_path, "print('never runs')\n")
    proc = subprocess.run([old_python, str(RUNNER), "--session", str(tmp_path / "s"), "--",
                           str(script)], capture_output=True, text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert re.search(rf"the interpreter {re.escape(old_python)} has no torch", lines[0]), lines
    assert "never runs" not in proc.stdout


def _agent(old_python: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([old_python, str(AGENT), *args], capture_output=True, timeout=timeout)


def _start(old_python: str, session: Path, script: Path) -> None:
    """The old Python's agent starts the runner in the app's Python (the one with torch)."""
    proc = _agent(old_python, "start", "--session", str(session), "--cwd", str(script.parent),
                  "--", sys.executable, "--session", str(session), "--", str(script))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["session"] == str(session)


def test_the_old_agent_streams_a_real_run_byte_for_byte(old_python, tmp_path):
    session = tmp_path / "s"
    _start(old_python, session, write_script(tmp_path, TRAIN))
    follow = _agent(old_python, "follow", "--session", str(session), timeout=300)
    assert follow.returncode == 0, follow.stderr
    mirror: dict[str, bytearray] = {}
    got = frames(follow.stdout)
    for header, data in got[:-1]:
        if header.get("w"):
            mirror[header["f"]] = bytearray(data)
        else:
            part = mirror.setdefault(header["f"], bytearray())
            assert header["o"] == len(part)  # in order, each byte once
            part += data
    assert got[-1][0] == {"done": 0}
    on_disk = {str(p.relative_to(session)): p.read_bytes() for p in session.rglob("*")
               if p.is_file() and not any(s.startswith(".") for s in p.relative_to(session).parts)}
    on_disk[remote_agent.OUT_FILE] = (session / remote_agent.OUT_FILE).read_bytes()
    assert {k: bytes(v) for k, v in mirror.items()} == on_disk
    assert any(k.endswith(".pt.trace.json.gz") for k in mirror)
    assert b"argv: []" in mirror["stdout.log"]
    assert events(session, "finished")[0]["rc"] == 0


def test_the_old_agent_stops_a_real_run(old_python, tmp_path):
    session = tmp_path / "s"
    script = write_script(tmp_path, "import time, torch\nprint('up', flush=True)\n"
                                    "while True:\n    time.sleep(0.05)\n")
    _start(old_python, session, script)
    deadline = time.monotonic() + 180
    while b"up" not in (session / "stdout.log").read_bytes() if (session / "stdout.log").exists() \
            else True:
        assert time.monotonic() < deadline, "the script never started"
        time.sleep(0.1)
    stop = _agent(old_python, "stop", "--session", str(session), "--reason", "enough", "--grace",
                  "10")
    assert stop.returncode == 0, stop.stderr
    while not (session / remote_agent.RC_FILE).exists():
        assert time.monotonic() < deadline, "the run did not end after stop"
        time.sleep(0.1)
    ending = events(session, "finished")[-1]
    assert ending["reason"] == "stopped by SIGTERM" and ending["rc"] == 143, ending  # grace kept
