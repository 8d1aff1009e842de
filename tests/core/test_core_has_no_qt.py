"""core/ never imports Qt: checked in the source of every module (subpackages included) and by
importing every module in a fresh interpreter. The import-linter contracts in pyproject.toml say
the same for `make test`; this test keeps the promise where only pytest runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.runner  # imports every core module in a fresh interpreter

CORE = Path(__file__).resolve().parents[2] / "core"
QT = re.compile(r"^\s*(from|import)\s+(PySide6|PyQt5|PyQt6|pyqtgraph|shiboken6)\b", re.M)
GUI = re.compile(r"^\s*(from|import)\s+stallscope\.gui\b", re.M)
# capture/ runs inside the user's interpreter, loaded by file path (stdlib + torch only): its
# sources are checked, but it is not imported as stallscope.core.capture.* here.
BY_PATH = ("capture",)


def core_modules() -> list[str]:
    names = []
    for path in sorted(CORE.rglob("*.py")):
        rel = path.relative_to(CORE).with_suffix("")
        if rel.parts[0] in BY_PATH or rel.name == "__main__":
            continue
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        names.append(".".join(("stallscope", "core", *parts)))
    return names


def test_no_qt_or_gui_import_in_core_sources():
    sources = list(CORE.rglob("*.py"))
    assert len(sources) > 40 and any(p.parent.name == "lmdb" for p in sources)
    offenders = [str(p.relative_to(CORE)) for p in sources
                 if QT.search(p.read_text()) or GUI.search(p.read_text())]
    assert offenders == []


def test_importing_every_core_module_loads_no_qt():
    modules = core_modules()
    assert "stallscope.core.lmdb.snippet" in modules and "stallscope.core.lineprof" in modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "import stallscope.core.cli as c; c.build_parser()\n"
        "qt = ('PySide6', 'PyQt5', 'PyQt6', 'pyqtgraph', 'shiboken6')\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in qt or m.split('.')[:2] == "
        "['stallscope', 'gui']]\n"
        "print(len(sys.modules), bad); sys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
