"""Is line_profiler importable by the interpreter that runs the user's script, and how to add it."""

from __future__ import annotations

import subprocess
import sys


def install_command(python: str | None = None) -> list[str]:
    """The command that installs line_profiler into the interpreter that runs the script."""
    return [python or sys.executable, "-m", "pip", "install", "line_profiler"]


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
            f"{' '.join(install_command(exe))}")
