"""The Dataset probe against a hostile file (issue 29): nothing it starts outlives the probe,
not even a daemon that double-forks and calls os.setsid(), and its answer file is read with a
cap (core/capture/contain.py, core/untrusted.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from runner_helpers import DOUBLE_FORK, alive

from stallscope.core.session.factory_probe import probe

pytestmark = pytest.mark.runner

DAEMON = DOUBLE_FORK + '''{after}


class Flowers:
    def __len__(self):
        return 5

    def __getitem__(self, i):
        return i
'''


def _gone_soon(pid: int, within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


@pytest.mark.parametrize("after, ok", [("", True), ("while True:\n    time.sleep(0.1)", False)])
def test_a_daemon_started_at_import_does_not_outlive_the_probe(tmp_path, after, ok):
    path = tmp_path / "data.py"
    path.write_text(DAEMON.replace("{after}", after))
    facts = probe(f"{path}:Flowers", timeout=30 if ok else 10)  # not ok: it never ends
    assert facts.ok is ok, facts
    daemon = int((tmp_path / "daemon.pid").read_text())
    assert daemon != os.getpid()
    try:
        assert _gone_soon(daemon), f"daemon {daemon} outlived the probe"
    finally:
        if alive(daemon):
            os.kill(daemon, 9)


def test_a_3_gb_answer_file_is_one_line(tmp_path):
    path = tmp_path / "data.py"
    path.write_text(textwrap.dedent('''
        import os, sys
        with open(sys.argv[2], "wb") as f:   # the probe's answer file, 3 GB (sparse)
            f.truncate(3 << 30)
        os._exit(0)
    '''))
    t = time.monotonic()
    facts = probe(f"{path}:Flowers", timeout=30)
    assert time.monotonic() - t < 20
    assert not facts.ok
    assert facts.error == ("the import's answer was not read (3,072.0 MiB, larger than the "
                           "1.0 MiB read of such a file)"), facts.error


def test_the_launcher_passes_the_exit_status_and_ends_what_is_left(tmp_path):
    pid_file = tmp_path / "left.pid"
    code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(600)'], start_new_session=True); "
            f"open({str(pid_file)!r}, 'w').write(str(p.pid)); sys.exit(7)")
    done = subprocess.run([sys.executable, "-m", "stallscope.core.capture.contain", "--",
                           sys.executable, "-c", code], timeout=60)
    assert done.returncode == 7
    left = int(pid_file.read_text())
    try:
        assert _gone_soon(left), f"{left} outlived the launcher"
    finally:
        if alive(left):
            os.kill(left, 9)
