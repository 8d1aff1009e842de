"""Import a Dataset factory in a CHILD process and bring back plain facts, so that a script named
by a received session (or one without a `__main__` guard, which trains when imported) never
runs in the app's process to find its Dataset.

    facts = probe("/x/train.py:JpegFolder", timeout=60)
    facts.ok, facts.kind, facts.length, facts.error      # plain data (JSON from the child)

The child is `python -m stallscope.core.session.factory_probe FILE:NAME OUT.json`, run with
the app's own interpreter in the file's folder under core/capture/contain.py: its launcher is
the subreaper of everything the import starts (a daemon that double-forks and calls setsid()
included) and ends all of it when the import ends or times out. Its stdout and stderr (the
script's prints) are discarded; the facts travel in OUT.json, read with a cap
(core/untrusted.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from stallscope.core.errors import StallscopeError
from stallscope.core.untrusted import read_json

DEFAULT_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0  # for the launcher to end what the import started, once told to stop


@dataclass
class Facts:
    spec: str
    ok: bool
    kind: str = ""           # the built object's type name
    length: int | None = None
    error: str = ""          # one line, when not ok
    seconds: float = 0.0

    @property
    def message(self) -> str:
        if self.ok:
            n = "" if self.length is None else f" of {self.length:,} samples"
            return f"{self.spec}: a {self.kind}{n} (imported in a separate process)"
        return f"{self.spec}: {self.error}"


def probe(spec: str, timeout: float = DEFAULT_TIMEOUT_S, python: str | None = None) -> Facts:
    """Build `file.py:name` in a child process; never raises for what the child does."""
    path, _, name = spec.rpartition(":")
    if not path or not name:
        return Facts(spec, False, error="expected file.py:name")
    if not Path(path).is_file():
        return Facts(spec, False, error="no such file")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="stallscope-probe-") as tmp:
        out = Path(tmp) / "facts.json"
        # -P: the file's folder (the cwd) is not put before the standard library, so its own
        # json.py or signal.py cannot stand in for ours; _build adds it for the factory.
        py = python or sys.executable
        cmd = [py, "-P", "-m", "stallscope.core.capture.contain", "--",
               py, "-P", "-m", __name__, spec, str(out)]
        proc = subprocess.Popen(cmd, cwd=str(Path(path).parent), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _end_group(proc)
            return Facts(spec, False, seconds=time.monotonic() - t0, error=(
                f"importing {Path(path).name} and building {name} did not finish in "
                f"{timeout:.0f} s (does the file train when imported? put its training under "
                "`if __name__ == \"__main__\":`)"))
        finally:
            _end_group(proc)
        seconds = time.monotonic() - t0
        if not out.exists():
            return Facts(spec, False, seconds=seconds,
                         error=f"the import ended without an answer (exit status {rc})")
        try:
            obj = read_json(out, "probe answer")
        except StallscopeError as exc:
            why = str(exc).removeprefix(f"{out}: probe answer: ")
            return Facts(spec, False, seconds=seconds,
                         error=f"the import's answer was not read ({why})")
    if not isinstance(obj, dict):
        return Facts(spec, False, seconds=seconds, error="the import gave no facts")
    length = obj.get("length")
    return Facts(spec, bool(obj.get("ok")), kind=str(obj.get("kind") or "")[:200],
                 length=length if isinstance(length, int) and length >= 0 else None,
                 error=str(obj.get("error") or "")[:500], seconds=seconds)


def _end_group(proc: subprocess.Popen) -> None:
    """Tell the launcher to end everything the import started; its group is killed after
    STOP_GRACE_S (or at once when it has already exited)."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(STOP_GRACE_S)
        except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


# ----------------------------------------------------------------------------- the child


def _build(spec: str) -> dict:
    path, _, name = spec.rpartition(":")
    sys.path.insert(0, str(Path(path).parent))  # the file's own sibling imports
    mod_spec = importlib.util.spec_from_file_location("stallscope_probed", path)
    if mod_spec is None or mod_spec.loader is None:
        return {"ok": False, "error": "not a Python file"}
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules["stallscope_probed"] = module
    try:
        mod_spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - the user's code: report it in one line
        return {"ok": False, "error": f"importing it failed: {_one_line(exc)}"}
    obj = getattr(module, name, None)
    if obj is None:
        return {"ok": False, "error": f"has no {name!r} at its top level"}
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "__getitem__")):
        try:
            obj = obj()
        except BaseException as exc:  # noqa: BLE001
            return {"ok": False, "error": f"{name}() failed: {_one_line(exc)}"}
    if not (hasattr(obj, "__getitem__") and hasattr(obj, "__len__")):
        return {"ok": False, "error": f"{name} gave a {type(obj).__name__}, not a map-style "
                                      "Dataset (needs __len__ and __getitem__)"}
    try:
        length = len(obj)
    except BaseException as exc:  # noqa: BLE001
        return {"ok": False, "error": f"len() of it failed: {_one_line(exc)}"}
    return {"ok": True, "kind": type(obj).__name__, "length": length}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    spec, out = (sys.argv[1:] if argv is None else argv)[:2]
    facts = _build(spec)
    Path(out).write_text(json.dumps(facts), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
