"""gui/views/start.py: the recent list's "N min ago" moves on while the start screen is up
(a timer started when shown, stopped when hidden), without re-reading the list."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from stallscope.core.recent import RecentStore
from stallscope.gui.views.start import AGE_REFRESH_MS, StartScreen


def test_ages_refresh_on_the_timer_while_shown(qtbot, tmp_path):
    trace = tmp_path / "run1.pt.trace.json"
    trace.write_text("{}")
    store = RecentStore()
    store.add(trace, headline="GPU busy 97%")
    opened = store.items()[0].opened
    screen = StartScreen(store)
    qtbot.addWidget(screen)
    screen.clock = lambda: opened + 5
    screen.refresh()
    row = screen.recent_list.itemWidget(screen.recent_list.item(0))
    assert row.when_label.text() == "just now"
    assert not screen.age_timer.isActive()  # nothing ticks for a screen nobody sees
    screen.show()
    qtbot.waitExposed(screen)
    assert screen.age_timer.isActive() and screen.age_timer.interval() == AGE_REFRESH_MS
    screen.clock = lambda: opened + 12 * 60 + 5  # twelve minutes later
    screen.age_timer.timeout.emit()
    assert row.when_label.text() == "12 min ago"
    # the same row widget: the list was not rebuilt, so a selection or scroll survives
    assert screen.recent_list.itemWidget(screen.recent_list.item(0)) is row
    screen.clock = lambda: opened + 3 * 3600
    screen.hide()
    assert not screen.age_timer.isActive()
    screen.show()  # shown again: the ages are brought up to date at once
    assert row.when_label.text() == "3 h ago"
