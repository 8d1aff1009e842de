"""Is line_profiler importable by the interpreter that runs the user's script, and how to add it
(the command itself is the runner's, which prints it in interpreters without stallscope)."""

from __future__ import annotations

import shlex
import subprocess
import sys

from stallscope.core.capture.lineprof_capture import install_command


def line_profiler_missing(python: str | None = None, timeout: float = 30.0) -> str | None:
    """None when `python` can import line_profiler, else a message with the install command."""
    exe = python or sys.executable
    try:
        proc = subprocess.run([exe, "-c", "import line_profiler"], capture_output=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{exe}: cannot run this interpreter ({exc})"
    if proc.returncode == 0:
        return None
    return (f"line_profiler is not installed in {exe}; install it with: "
            f"{shlex.join(install_command(exe))}")
