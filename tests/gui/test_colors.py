"""One place for colours: every idle cause has its colour and label, and no gui module but
colors.py (and theme.py's two palettes) writes a hex colour of its own."""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtGui import QColor

from stallscope.core.causes import BY_CODE, CAUSES, label
from stallscope.gui import colors

GUI = Path(colors.__file__).resolve().parent
HEX = re.compile(r"#[0-9a-fA-F]{6}\b")
# Hex values still written by other owners' modules (issue 10): they move to colors.py there.
NOT_YET_MOVED: set[str] = set()


def test_every_cause_has_its_own_colour_and_a_label():
    assert set(colors.CAUSE_COLORS) == set(CAUSES)
    hues = [QColor(colors.CAUSE_COLORS[c]).name() for c in CAUSES]
    assert len(set(hues)) == len(CAUSES), "two causes share a colour"
    assert colors.BUSY_COLOR.lower() not in hues
    for cause in CAUSES:
        assert QColor(colors.CAUSE_COLORS[cause]).isValid()
        assert label(cause) == BY_CODE[cause].label != ""


# The cause list has one set of names: causes.CAUSES, causes.BY_CODE, causes.label (issue 18).
OTHER_CAUSE_NAMES = re.compile(r"\b(CAUSE_LABELS|CAUSE_LIST|CAUSE_ORDER|cause_label)\b")
# Other owners' modules still using them (issue 18): they move to causes.* there.
NAMES_NOT_YET_MOVED: set[str] = set()


def test_gui_modules_name_causes_only_through_core_causes():
    assert not hasattr(colors, "CAUSE_LABELS") and not hasattr(colors, "CAUSES")
    offenders = {}
    for path in sorted(GUI.rglob("*.py")):
        rel = path.relative_to(GUI).as_posix()
        if rel == "colors.py" or rel in NAMES_NOT_YET_MOVED:
            continue
        found = OTHER_CAUSE_NAMES.findall(path.read_text(encoding="utf-8"))
        if found:
            offenders[rel] = sorted(set(found))
    assert offenders == {}, f"cause names outside core/causes.py: {offenders}"


def test_no_gui_module_writes_its_own_hex_colours():
    offenders = {}
    for path in sorted(GUI.rglob("*.py")):
        rel = path.relative_to(GUI).as_posix()
        if rel in ("colors.py", "theme.py") or rel in NOT_YET_MOVED:
            continue
        found = HEX.findall(path.read_text(encoding="utf-8"))
        if found:
            offenders[rel] = found
    assert offenders == {}, f"hex colours outside gui/colors.py: {offenders}"
