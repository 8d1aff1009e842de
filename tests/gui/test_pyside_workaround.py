"""The app survives thousands of signal emits (PySide6 6.12.0 + Python 3.11 drop a reference
to True per emit; without gui/pyside_workaround.py the process aborts with bool_dealloc)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.runner  # a child interpreter

SCRIPT = """
import sys
import stallscope.gui  # applies the workaround where the bug exists
from PySide6.QtCore import QCoreApplication, QObject, Signal

class Emitter(QObject):
    sig_tick = Signal(object)

app = QCoreApplication([])
e = Emitter()
got = []
e.sig_tick.connect(got.append)
for i in range(20000):
    e.sig_tick.emit(i)
assert len(got) == 20000
print("alive", sys.getrefcount(True) > 1000)
"""


def test_twenty_thousand_emits_do_not_abort():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "alive True" in run.stdout
