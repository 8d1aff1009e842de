"""The main window's rough edges a new user hits: the exported PNG holds the plots (the timeline
and the whole summary panel, no toolbar or hints) or the window by choice; file dialogs start in
the open document's folder; the Help menu has the README's key sections and every shortcut."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from fixture_traces import fixture_path
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QFileDialog

from stallscope.gui.dialogs.help import SECTIONS


def test_exported_png_is_the_plots_or_the_window_by_choice(qtbot, window, open_and_wait,
                                                           tmp_path):
    window.resize(1024, 700)
    open_and_wait(fixture_path("kineto_nw0"))
    QApplication.processEvents()
    plots, whole = tmp_path / "plots.png", tmp_path / "window.png"
    assert window.export_to(str(plots)) and window.export_to(str(whole), whole_window=True)
    a, b = QImage(str(plots)), QImage(str(whole))
    assert (b.width(), b.height()) == (window.width(), window.height())
    analysis = window.analysis
    timeline = analysis.timeline
    content = analysis.summary.widget()
    # the timeline's legend and lanes beside the summary's whole content, scrolled part too
    assert a.width() == timeline.graphics.width() + 8 + content.width()
    assert a.height() == max(timeline.legend.height() + 8 + timeline.graphics.height(),
                             content.height())
    assert content.height() > analysis.summary.viewport().height()  # more than was shown
    # no toolbar: the step buttons and the hint are not in it (narrower than the window's
    # analysis page is ruled out by the size above)
    assert a.height() != analysis.height()


def test_file_dialogs_start_in_the_open_documents_folder(qtbot, window, open_and_wait,
                                                         monkeypatch):
    assert window.dialog_folder() == ""  # nothing open: the current directory
    path = fixture_path("kineto_nw0")
    open_and_wait(path)
    seen = []

    def fake_open(_parent, _caption, folder, *_filters):
        seen.append(folder)
        return "", ""

    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(fake_open))
    monkeypatch.setattr(QFileDialog, "getExistingDirectory",
                        staticmethod(lambda _p, _c, folder: seen.append(folder) or ""))
    window.choose_trace()
    window.choose_compare()
    window.choose_session()
    window.choose_line_profile()
    assert seen == [str(path.parent)] * 4


def test_help_menu_has_the_key_sections_and_every_shortcut(qtbot, window):
    help_menu = next(a.menu() for a in window.menuBar().actions() if "Help" in a.text())
    entries = [a.text() for a in help_menu.actions() if a.text()]
    assert entries[:4] == list(SECTIONS.values()) and entries[-1] == "About stallscope"
    window.show_help("keys")
    dialog = window.help_dialog
    qtbot.addWidget(dialog)
    text = dialog.browser.toPlainText()
    for title in SECTIONS.values():
        assert title in text
    for name in ("Open", "Run script", "Compare with", "Zoom to fit", "Export"):
        action = window.actions_by_name[name]
        assert action.shortcut().toString() in text and name in text
    assert "Shift + drag" in text and "data loading" in text  # gestures and the causes
