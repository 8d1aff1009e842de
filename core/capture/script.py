"""The user's script: checks before it runs, and its traceback without the runner's frames."""

from __future__ import annotations

import runpy
import traceback
from pathlib import Path

from .exits import SetupError

CAPTURE_DIR = Path(__file__).resolve().parent


def check_script(script: Path) -> None:
    if not script.exists():
        raise SetupError(f"script not found: {script}")
    if script.is_dir() and not (script / "__main__.py").exists():
        raise SetupError(f"{script} is a folder without __main__.py")


def compile_check(script: Path) -> SyntaxError | None:
    if script.is_dir():
        return None
    try:
        compile(script.read_bytes(), str(script), "exec")
    except SyntaxError as exc:
        return exc
    return None


def script_traceback(exc: BaseException) -> str:
    """The traceback as the user would see it from `python script.py`: runner frames dropped."""
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not (name == runpy.__file__ or name.startswith("<frozen runpy")
                or Path(name).parent == CAPTURE_DIR):
            break
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))
