"""Window geometry, dock/toolbar layout and splitter positions, remembered between launches.

Settings live in one INI file next to the recent list (core.recent.config_dir(), which tests
point at a tmp dir with STALLSCOPE_CONFIG_DIR).

    restore_layout(window)            # after the docks exist, before show()
    save_layout(window)               # from closeEvent
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtWidgets import QMainWindow, QSplitter, QWidget

from stallscope.core.recent import config_dir

# Bump when the dock set changes so an old saved state is not forced onto new docks.
LAYOUT_VERSION = 1
SETTINGS_FILE = "stallscope.ini"


def settings() -> QSettings:
    path = config_dir() / SETTINGS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    return QSettings(str(path), QSettings.Format.IniFormat)


def save_layout(window: QMainWindow, store: QSettings | None = None, key: str = "main") -> None:
    store = store or settings()
    store.setValue(f"{key}/geometry", window.saveGeometry())
    store.setValue(f"{key}/state", window.saveState(LAYOUT_VERSION))
    for splitter in _named_splitters(window):
        store.setValue(f"{key}/splitter/{splitter.objectName()}", splitter.saveState())
    store.sync()


def restore_layout(window: QMainWindow, store: QSettings | None = None, key: str = "main") -> bool:
    """Apply the saved layout; False (and the window's defaults kept) when there is none."""
    store = store or settings()
    geometry = _bytes(store.value(f"{key}/geometry"))
    state = _bytes(store.value(f"{key}/state"))
    if geometry is None and state is None:
        return False
    ok = True
    if geometry is not None:
        ok &= window.restoreGeometry(geometry)
    if state is not None:
        ok &= window.restoreState(state, LAYOUT_VERSION)
    for splitter in _named_splitters(window):
        saved = _bytes(store.value(f"{key}/splitter/{splitter.objectName()}"))
        if saved is not None:
            splitter.restoreState(saved)
    return bool(ok)


def forget_layout(store: QSettings | None = None, key: str = "main") -> None:
    store = store or settings()
    store.remove(key)
    store.sync()


def _named_splitters(window: QWidget) -> list[QSplitter]:
    # Only splitters with an objectName can be matched up again on the next launch.
    return [s for s in window.findChildren(QSplitter) if s.objectName()]


def _bytes(value: object) -> QByteArray | None:
    if isinstance(value, QByteArray) and not value.isEmpty():
        return value
    if isinstance(value, bytes | bytearray) and value:
        return QByteArray(bytes(value))
    return None
