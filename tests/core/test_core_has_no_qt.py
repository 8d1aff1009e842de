"""core/ never imports Qt: checked in the source and in a fresh interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core"
QT = re.compile(r"^\s*(from|import)\s+(PySide6|PyQt5|PyQt6|pyqtgraph|shiboken6)\b", re.M)


def test_no_qt_import_in_core_sources():
    offenders = [p.name for p in CORE.rglob("*.py") if QT.search(p.read_text())]
    assert offenders == []


def test_importing_every_core_module_loads_no_qt():
    modules = sorted(p.stem for p in CORE.glob("*.py") if p.stem not in ("__init__", "runner"))
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module('stallscope.core.' + m)\n"
        "import stallscope.core.cli as c; c.build_parser()\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('PySide6', 'PyQt5', 'PyQt6', 'pyqtgraph', 'shiboken6')]\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
