"""The script sees the terminal stallscope runs in: `stallscope-cli run` under a real
pseudo-terminal gives the script a terminal of the same size (isatty() True, so tqdm, rich and
coloured logs behave as in a plain run), while every line still lands in stdout.log; without a
terminal the script's output is a pipe, as before."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from runner_helpers import write_script

pytestmark = pytest.mark.runner

CLI = [sys.executable, "-m", "stallscope.core.cli", "run"]
SCRIPT = """
import os, sys
def size(fd):
    try:
        return "%dx%d" % tuple(os.get_terminal_size(fd))
    except OSError:
        return "none"
print("stdout tty:", sys.stdout.isatty(), size(1), flush=True)
print("stderr tty:", sys.stderr.isatty(), size(2), file=sys.stderr, flush=True)
print("progress 50%\\rprogress 100%")
"""


def run_in_terminal(argv: list[str], cwd: Path, cols: int = 97, rows: int = 31,
                    timeout: float = 240) -> tuple[int, bytes]:
    """argv with stdout and stderr on a new pseudo-terminal of cols x rows; what it showed."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    shown, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 0.5)[0]:
                if proc.poll() is not None:
                    break  # ended, and nothing more to read (a leftover child holds the pty)
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal's other end is gone
                break
            if not data:
                break
            shown += data
        return proc.wait(timeout=max(1.0, deadline - time.monotonic())), shown
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def test_the_script_sees_the_terminal_and_the_log_keeps_its_lines(tmp_path):
    script = write_script(tmp_path, SCRIPT)
    session = tmp_path / "session"
    rc, shown = run_in_terminal([*CLI, "--session", str(session), "--", str(script)], tmp_path)
    assert rc == 0, shown.decode(errors="replace")
    assert b"stdout tty: True 97x31" in shown and b"stderr tty: True 97x31" in shown, shown
    log = (session / "stdout.log").read_bytes()
    assert b"stdout tty: True 97x31\n" in log and b"stderr tty: True 97x31\n" in log, log
    assert b"progress 50%\rprogress 100%\n" in log  # the script's bytes, line ends unchanged


def test_without_a_terminal_the_script_writes_to_pipes_as_before(tmp_path):
    script = write_script(tmp_path, SCRIPT)
    session = tmp_path / "session"
    proc = subprocess.run([*CLI, "--session", str(session), "--", str(script)], cwd=tmp_path,
                          capture_output=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert b"stdout tty: False none" in proc.stdout
    assert b"stderr tty: False none" in proc.stderr
    assert b"stdout tty: False none\n" in (session / "stdout.log").read_bytes()


def test_the_runner_run_straight_in_a_terminal_gives_the_script_one(tmp_path):
    """python runner.py in a terminal (no stallscope-cli in between): the same terminal."""
    from runner_helpers import RUNNER

    script = write_script(tmp_path, SCRIPT)
    session = tmp_path / "session"
    rc, shown = run_in_terminal([sys.executable, str(RUNNER), "--session", str(session), "--",
                                 str(script)], tmp_path, cols=120, rows=40)
    assert rc == 0, shown.decode(errors="replace")
    assert b"stdout tty: True 120x40" in shown
    assert b"stdout tty: True 120x40\n" in (session / "stdout.log").read_bytes()


def test_a_bad_terminal_spec_is_one_line(tmp_path):
    from runner_helpers import RUNNER

    proc = subprocess.run([sys.executable, str(RUNNER), "--terminal", "stdin:80", "--",
                           str(write_script(tmp_path, SCRIPT))], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "--terminal stdin:80: expected" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("body", ["os.close(1); os.close(2)",
                                  "os.close(2); raise RuntimeError('after closing')"])
def test_a_script_that_closes_its_terminal_gets_no_runner_traceback(tmp_path, body):
    """As test_runner_hostile's pipes case, on a terminal: the words still get out."""
    from runner_helpers import RUNNER, finished

    script = write_script(tmp_path, f"import os, sys\nprint('hello', flush=True)\n{body}\n")
    session = tmp_path / "session"
    rc, shown = run_in_terminal([sys.executable, str(RUNNER), "--session", str(session), "--",
                                 str(script)], tmp_path)
    text = shown.decode(errors="replace")
    assert "stallscope/core/capture" not in text and "runner error" not in text, text
    raised = "raise" in body
    assert rc == finished(session)["rc"] == (1 if raised else 0), text
    said = "RuntimeError: after closing" if raised else "no steps were seen"
    assert said in text and said in (session / "stdout.log").read_text()


def test_stallscope_s_lines_start_a_line_of_their_own_after_an_open_one(tmp_path):
    # a script whose last output is a progress line without its newline: stallscope's summary
    # was glued to it ("58/500stallscope: session ...")
    script = write_script(tmp_path, "import sys\nsys.stdout.write('58/500 loss=0.53')\n")
    rc, shown = run_in_terminal([*CLI, "--session", str(tmp_path / "s"), "--", str(script)],
                                tmp_path)
    text = shown.decode(errors="replace")
    assert rc == 0, text
    assert "58/500 loss=0.53" in text and "0.53stallscope: session" not in text, text
    assert "\nstallscope: session " in text.replace("\r", ""), text
    proc = subprocess.run([*CLI, "--session", str(tmp_path / "p"), "--", str(script)],
                          cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=240)
    # the CLI's own lines (the runner's "no steps" note races the script's bytes on its
    # stderr: it is the runner's to place, not the CLI's)
    assert b"0.53stallscope: session" not in proc.stdout, proc.stdout
    assert b"\nstallscope: session " in proc.stdout, proc.stdout
