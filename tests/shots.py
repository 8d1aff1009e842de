"""Screenshots from GUI tests: every test renders what it checks, but files are written only
where STALLSCOPE_SHOTS names a folder (`STALLSCOPE_SHOTS=/tmp/shots make test`)."""

from __future__ import annotations

import os
from pathlib import Path


def shots_dir() -> Path | None:
    where = os.environ.get("STALLSCOPE_SHOTS", "").strip()
    if not where:
        return None
    path = Path(where)
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_shot(widget, name: str):
    """Render `widget` (the test fails on an empty grab); save it as NAME.png when asked."""
    from PySide6.QtWidgets import QApplication

    QApplication.processEvents()
    image = widget.grab()
    assert not image.isNull() and image.width() > 0 and image.height() > 0, name
    where = shots_dir()
    if where is not None:
        assert image.save(str(where / f"{name}.png")), name
    return image
