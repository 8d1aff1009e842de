"""Opening line stats for the heatmap: a session folder, a .json, or a kernprof .lprof (a pickle,
read only once the user says yes: docs/definitions.md "Someone else's inputs").

    trust = ask_trust(path, parent)       # False: no pickle; True: the user agreed; None: declined
    profiles = open_profiles(path)        # read right here (the standalone view), or None
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QMessageBox, QWidget

from stallscope.core import lineprof
from stallscope.core.errors import StallscopeError
from stallscope.core.lineprof import Profile


def confirm_pickle(parent: QWidget | None, path: str | Path) -> bool:
    answer = QMessageBox.question(
        parent, "Open a .lprof file?",
        f"{Path(path).name} is a kernprof .lprof file: a Python pickle, which can run code "
        "when it is read.\n\nOpen it only if you (or someone you trust) made it.",
        QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Cancel)
    return answer == QMessageBox.StandardButton.Open


def ask_trust(path: str | Path, parent: QWidget | None = None,
              confirm=confirm_pickle) -> bool | None:
    """trust_pickle for reading `path`: False for JSON and folders, True once the user agrees
    to read a pickle (.lprof), None when they decline."""
    if not lineprof.needs_trust(path):
        return False
    return True if confirm(parent, Path(path)) else None


def open_profiles(path: str | Path, parent: QWidget | None = None,
                  confirm=confirm_pickle) -> list[Profile] | None:
    """Profiles from a session folder, a .json or (after `confirm`) a .lprof, read right here:
    for the standalone runner, before any window shows (the app reads them through
    LineStatsController). None when the user declines; a one-line message box on a bad file."""
    trust = ask_trust(path, parent, confirm)
    if trust is None:
        return None
    try:
        return lineprof.with_sources(lineprof.load_any(path, trust_pickle=trust))
    except StallscopeError as exc:
        QMessageBox.warning(parent, "Cannot open line stats", str(exc))
        return None
