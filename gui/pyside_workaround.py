"""Guard against a PySide6 refcount bug that would crash the app after a few hundred signals.

PySide6 6.12.0 on Python 3.11 drops one reference to `True` on every `Signal.emit()` (with or
without receivers). Python < 3.12 does not make bools immortal, so after ~600-3000 emits
`True` is deallocated and the process aborts ("Fatal Python error: bool_dealloc"). A zoom
of a pyqtgraph plot emits several signals, so an interactive session dies within minutes.

The same build also loses references to None elsewhere (seen as "none_dealloc" while a
pyqtgraph axis restyles after many plots). `apply()` measures the leak with a private signal
and, only where it exists, lends True, False and None a very large reference count (what
Python 3.12 does for immortal objects). Nothing is changed on Python >= 3.12 or on a PySide6
without the bug.
"""

from __future__ import annotations

import ctypes
import sys

_LOAN = 1 << 40
_applied = False


def leaks_true_on_emit() -> bool:
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        sig_probe = Signal(object)

    probe = _Probe()
    before = sys.getrefcount(True)
    for _ in range(8):
        probe.sig_probe.emit(None)
    return sys.getrefcount(True) < before - 4


def apply() -> bool:
    """Returns True when the workaround was needed and applied (idempotent)."""
    global _applied
    if _applied or sys.version_info >= (3, 12):
        return _applied
    if not leaks_true_on_emit():
        return False
    for obj in (True, False, None):
        ctypes.c_ssize_t.from_address(id(obj)).value += _LOAN
    _applied = True
    return True


_collector = None


def collect_on_gui_thread():
    """Run Python's cycle collector only on the GUI thread, from a 1 s timer.

    A collection that happens to run in a worker thread (a trace loading, a ranks job) can free a
    widget's Python wrapper there; shiboken then deletes the widget on the GUI thread at its next
    Python call, even inside a model callback that holds a Qt mutex, and the app deadlocks (seen
    in QObject::disconnect under QSortFilterProxyModel::data). pyqtgraph's GarbageCollector
    disables automatic collection and collects on a QTimer instead. Needs a QApplication."""
    global _collector
    if _collector is None:
        from pyqtgraph.util.garbage_collector import GarbageCollector

        _collector = GarbageCollector(interval=1.0)
    return _collector
