"""At 1024x700 the top card's buttons (Try it… / Convert to LMDB…) are on the first screen of
the summary panel, on kineto_nw0 and on the bundled demo run as the app runs it; no heading,
culprit or label of the panel is clipped (a narrow panel drops a heading's hint into its
tooltip and breaks long event names instead of cutting them)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import subprocess
import sys
from pathlib import Path

import pytest
from fixture_traces import fixture_path
from PySide6.QtWidgets import QApplication
from reference_images import clipped_labels
from shots import save_shot

from stallscope.core.capture import runner
from stallscope.gui.views.summary_parts import Heading
from stallscope.gui.widgets import breakable
from stallscope.resources import RESOURCES

pytestmark = pytest.mark.runner  # a script under the runner (subprocess)

DEMO = RESOURCES / "demo" / "train_demo.py"


@pytest.fixture(scope="module")
def demo_session(tmp_path_factory):
    """The bundled demo under the runner with the app's defaults (about 12 s)."""
    session = tmp_path_factory.mktemp("demo") / "session"
    done = subprocess.run([sys.executable, str(Path(runner.__file__)), "--session", str(session),
                           "--", str(DEMO)], capture_output=True, text=True, timeout=240,
                          cwd=str(DEMO.parent))
    assert done.returncode == 0, done.stderr[-2000:]
    return session


def first_screen_of(panel, widget) -> tuple[int, int]:
    """(top, bottom) of `widget` in the panel's viewport, as shown without scrolling."""
    top = widget.mapTo(panel.viewport(), widget.rect().topLeft()).y()
    return top, top + widget.height()


def assert_buttons_on_first_screen(window, name: str) -> None:
    window.resize(1024, 700)
    QApplication.processEvents()
    panel = window.analysis.summary
    assert panel.verticalScrollBar().value() == 0
    card = panel.advice_cards[0]
    assert set(card.buttons) == {"try_it", "lmdb"}, name
    for key, button in card.buttons.items():
        top, bottom = first_screen_of(panel, button)
        assert button.isVisibleTo(window) and 0 <= top and bottom <= panel.viewport().height(), (
            f"{name}: {key} at {top}..{bottom}, the panel shows 0..{panel.viewport().height()}")
    assert clipped_labels(panel) == [], name
    save_shot(window, f"summary_fold_{name}_1024x700")


def test_card_buttons_are_on_the_first_screen_of_kineto_nw0(qtbot, window, open_and_wait):
    open_and_wait(fixture_path("kineto_nw0"))
    assert_buttons_on_first_screen(window, "kineto_nw0")


def test_card_buttons_are_on_the_first_screen_of_the_demo(qtbot, window, open_and_wait,
                                                          demo_session):
    open_and_wait(demo_session)
    assert_buttons_on_first_screen(window, "demo")


def test_a_heading_keeps_its_hint_only_where_it_fits(qtbot):
    heading = Heading("GPU idle time by cause", "click: the longest span")
    qtbot.addWidget(heading)
    heading.show()
    for width, whole in ((600, True), (200, False)):
        heading.resize(width, 40)
        QApplication.processEvents()
        assert heading.text() == ("GPU idle time by cause (click: the longest span)" if whole
                                  else "GPU idle time by cause")
        assert heading.toolTip() == ("" if whole else "Click: the longest span")
        assert heading.fontMetrics().horizontalAdvance(heading.text()) <= width or not whole


def test_long_event_names_get_break_points_and_short_words_none():
    name = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ ×6, 352.40 ms"
    shown = breakable(name)
    assert shown.replace("\u200b", "") == name
    assert shown.split(" ")[1:] == name.split(" ")[1:]  # "×6," and the time stay as they are
    assert "(\u200bData\u200bLoader)#\u200b_Single\u200bProcess" in shown
    assert shown.endswith("Loader\u200bIter\u200b.__next__ ×6, 352.40 ms")
    assert breakable("num_workers=2, persistent_workers=True") == (
        "num_workers=2, persistent_workers=True")
