"""The start screen: its buttons emit their requests, the recent list shows what the JSON file
holds (with headlines), clicking a row opens it, and both themes render."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from fixture_traces import fixture_path
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QKeySequence
from PySide6.QtWidgets import QLabel
from shots import save_shot

from stallscope.core.recent import RecentStore
from stallscope.gui import theme
from stallscope.gui.views.start import ACTIONS, RecentRow, StartScreen, ago


@pytest.fixture
def store_with_items(tmp_path):
    trace = tmp_path / "run1.pt.trace.json.gz"
    trace.write_bytes(b"\x1f\x8b")
    session = tmp_path / "sess-a"
    session.mkdir()
    (session / "events.jsonl").write_text("")
    store = RecentStore()
    store.add(tmp_path / "gone.json", headline="GPU idle 9%, mostly CPU-GPU syncs", opened=10.0)
    store.add(session, opened=20.0)
    store.add(trace, headline="GPU idle 44%, mostly data loading", opened=30.0)
    return store, trace, session


def make_screen(qtbot, store=None, mode="light"):
    theme.apply_theme(qtbot_app(), mode)
    screen = StartScreen(store if store is not None else RecentStore())
    qtbot.addWidget(screen)
    screen.resize(1100, 680)
    screen.show()
    qtbot.waitExposed(screen)
    return screen


def qtbot_app():
    from PySide6.QtWidgets import QApplication

    return QApplication.instance()


def test_each_action_button_emits_its_request(qtbot):
    screen = make_screen(qtbot)
    assert [screen.buttons[k].title_label.text() for k, *_ in ACTIONS] == [
        "Open trace", "Open session", "Run script", "Run demo", "Convert to LMDB"]
    for key, _title, _hint, _icon, signal_name in ACTIONS:
        with qtbot.waitSignal(getattr(screen, signal_name), timeout=1000):
            qtbot.mouseClick(screen.buttons[key], Qt.MouseButton.LeftButton)
    # a click on the hint text inside a card still reaches the card
    card = screen.buttons["demo"]
    inside = card.hint_label.mapTo(card, card.hint_label.rect().center())
    with qtbot.waitSignal(screen.sig_demo_requested, timeout=1000):
        qtbot.mouseClick(card, Qt.MouseButton.LeftButton, pos=inside)


def test_empty_recent_list_shows_the_empty_state(qtbot):
    screen = make_screen(qtbot)
    assert screen.recent_list.count() == 0
    assert screen.recent_stack.currentWidget() is screen.empty_state
    texts = " ".join(w.text() for w in screen.empty_state.findChildren(QLabel))
    assert "Nothing opened yet" in texts and "run the demo" in texts
    assert not screen.clear_button.isVisible()


def test_recent_items_come_from_the_store_with_headlines(qtbot, store_with_items, tmp_path):
    store, trace, session = store_with_items
    screen = make_screen(qtbot, RecentStore())  # a second store object: reads the file
    assert screen.recent_paths() == [str(trace), str(session), str(tmp_path / "gone.json")]
    rows = [screen.recent_list.itemWidget(screen.recent_list.item(i)) for i in range(3)]
    assert all(isinstance(r, RecentRow) for r in rows)
    assert rows[0].name_label.text() == "run1.pt.trace.json.gz"
    assert rows[0].headline_label.text() == "GPU idle 44%, mostly data loading"
    assert rows[0].headline_label.objectName() == "RecentHeadline"
    assert rows[1].headline_label.text() == "Not analysed yet"
    assert rows[1].item.kind == "session"
    assert rows[2].headline_label.text().startswith("Not found")
    assert screen.recent_stack.currentWidget() is screen.recent_list
    assert screen.clear_button.isVisible()


def test_clicking_a_recent_row_opens_it_but_not_a_missing_one(qtbot, store_with_items):
    store, trace, _session = store_with_items
    screen = make_screen(qtbot, store)
    lst = screen.recent_list
    with qtbot.waitSignal(screen.sig_recent_activated, timeout=1000) as blocker:
        qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton,
                         pos=lst.visualItemRect(lst.item(0)).center())
    assert blocker.args == [str(trace)]
    with qtbot.assertNotEmitted(screen.sig_recent_activated, wait=100):
        qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton,
                         pos=lst.visualItemRect(lst.item(2)).center())


def test_remove_and_clear_write_through_to_the_file(qtbot, store_with_items, tmp_path):
    store, trace, session = store_with_items
    screen = make_screen(qtbot, store)
    screen.remove_recent(str(tmp_path / "gone.json"))
    assert [it.path for it in RecentStore().items()] == [str(trace), str(session)]
    assert screen.recent_list.count() == 2
    qtbot.mouseClick(screen.clear_button, Qt.MouseButton.LeftButton)
    assert RecentStore().items() == []
    assert screen.recent_stack.currentWidget() is screen.empty_state


def test_refresh_picks_up_a_newly_opened_trace(qtbot, tmp_path):
    screen = make_screen(qtbot)
    (tmp_path / "new.json").write_text("{}")
    screen.store.add(tmp_path / "new.json", headline="GPU busy 97%, no idle time worth chasing")
    screen.refresh()
    assert screen.recent_list.count() == 1
    row = screen.recent_list.itemWidget(screen.recent_list.item(0))
    assert row.headline_label.text() == "GPU busy 97%, no idle time worth chasing"
    assert row.when_label.text() == "just now"


def test_shortcut_hints_show_on_the_cards(qtbot):
    screen = make_screen(qtbot)
    screen.set_shortcut_hints({"open_trace": "Ctrl+O", "run": "Ctrl+R", "nope": "X"})
    assert screen.buttons["open_trace"].key_label.text() == "Ctrl+O"
    assert screen.buttons["open_trace"].key_label.isVisible()
    assert not screen.buttons["convert"].key_label.isVisible()


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_both_themes_render_in_their_own_colours(qtbot, store_with_items, mode):
    store, *_ = store_with_items
    screen = make_screen(qtbot, store, mode)
    image = screen.grab().toImage()
    pal = theme.PALETTES[mode]
    assert image.pixelColor(5, 5) == QColor(pal.window)  # page background
    primary = screen.buttons["open_trace"]
    p = primary.mapTo(screen, QPoint(primary.width() - 12, primary.height() // 2))
    assert image.pixelColor(p) == QColor(pal.accent)
    # many distinct colours: text, icons and cards were drawn, not a blank page
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7)
               for y in range(0, image.height(), 7)}
    assert len(colours) > 40


def test_ago_wording():
    assert ago(1000.0, 1030.0) == "just now"
    assert ago(0.0, 125.0) == "2 min ago"
    assert ago(0.0, 3 * 3600 + 5) == "3 h ago"
    assert ago(0.0, 30 * 3600) == "yesterday"
    assert ago(0.0, 5 * 86400) == "5 days ago"


def test_in_the_main_window_a_recent_click_opens_the_trace_and_records_its_headline(qtbot):
    traces = [fixture_path("kineto_nw0")]
    from stallscope.gui.main_window import MainWindow

    store = RecentStore()
    store.add(traces[0], opened=1.0)  # known, never analysed
    theme.apply_theme(qtbot_app(), "light")
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    screen = window.start
    assert screen.buttons["open_trace"].key_label.text() == (
        window.actions_by_name["Open"].shortcut().toString(QKeySequence.SequenceFormat.NativeText))
    assert not window.actions_by_name["Run script"].icon().isNull()
    row = screen.recent_list.itemWidget(screen.recent_list.item(0))
    assert row.headline_label.text() == "Not analysed yet"

    lst = screen.recent_list
    with qtbot.waitSignal(window.sig_document_shown, timeout=60_000):
        qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton,
                         pos=lst.visualItemRect(lst.item(0)).center())
    (item,) = RecentStore().items()
    assert item.headline == "GPU idle 44%, mostly data loading"
    row = screen.recent_list.itemWidget(screen.recent_list.item(0))
    assert row.headline_label.text() == "GPU idle 44%, mostly data loading"


def test_a_long_recent_path_is_elided_in_the_middle_never_scrolled_sideways(qtbot, tmp_path):
    """At 1024x700 a deep folder and a long name fit the row: cut in the middle ("…"), the
    whole path in the row's tooltip, and no sideways scroll bar."""
    from PySide6.QtWidgets import QApplication

    deep = tmp_path.joinpath(*[f"experiment-{i:02d}-with-a-long-folder-name" for i in range(8)])
    deep.mkdir(parents=True)
    trace = deep / ("resnet50_imagenet_bs256_amp_channels_last_" * 3 + "worker0.pt.trace.json.gz")
    trace.write_bytes(b"\x1f\x8b")
    store = RecentStore()
    store.add(trace, headline="GPU idle 44%, mostly data loading", opened=30.0)
    screen = make_screen(qtbot, store)
    screen.resize(1024, 700)
    QApplication.processEvents()
    listing = screen.recent_list
    row = listing.itemWidget(listing.item(0))
    assert listing.horizontalScrollBar().maximum() == 0
    assert row.width() <= listing.viewport().width()
    for label in (row.name_label, row.path_label):
        assert label.is_elided(), label.full_text()
        shown, full = label.text(), label.full_text()
        assert "…" in shown and full.startswith(shown[:shown.index("…")])  # cut in the middle
        assert full.endswith(shown[shown.index("…") + 1:])
        assert label.fontMetrics().horizontalAdvance(shown) <= label.width()
        assert label.geometry().right() <= row.width()
    assert row.path_label.full_text() == str(deep)
    assert listing.item(0).toolTip() == str(trace)
    save_shot(screen, "start_long_recent_path_1024x700")
