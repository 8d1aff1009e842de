"""Themes, icons, the About dialog and the remembered window layout."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import re

import pytest
from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QLabel,
    QMainWindow,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from stallscope.gui import layout_state, theme
from stallscope.gui.dialogs import about
from stallscope.gui.views.start import ACTIONS


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    cfg = tmp_path / "config"
    monkeypatch.setenv("STALLSCOPE_CONFIG_DIR", str(cfg))
    yield cfg
    theme.apply_theme(QApplication.instance(), "system")


def _near(color: QColor, want: str, tol: int = 12) -> bool:
    w = QColor(want)
    return max(abs(color.red() - w.red()), abs(color.green() - w.green()),
               abs(color.blue() - w.blue())) <= tol


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_a_themed_page_renders_in_its_palette_and_disabled_default_buttons_look_off(
        qapp, qtbot, mode):
    """What the theme does, seen on rendered pixels: the page background, text, a default
    button in the accent colour, and the same button disabled (the LMDB wizard's Next before
    a source is chosen) no longer in the accent colour."""
    assert theme.apply_theme(qapp, mode) == mode
    pal = theme.PALETTES[mode]
    page = QWidget()
    qtbot.addWidget(page)
    box = QVBoxLayout(page)
    label = QLabel("Why is my GPU waiting?")
    on, off = QPushButton("Next"), QPushButton("Next")
    for button in (on, off):
        button.setDefault(True)
        button.setMinimumWidth(120)
    off.setEnabled(False)
    for w in (label, on, off):
        box.addWidget(w)
    page.resize(320, 160)
    page.show()
    qtbot.waitExposed(page)
    image = page.grab().toImage()
    assert _near(image.pixelColor(2, 2), pal.window)

    def body(button) -> QColor:  # a pixel of the button's face, left of its text
        at = button.geometry()
        return image.pixelColor(at.left() + 8, at.center().y())

    assert _near(body(on), pal.accent), body(on).name()
    assert not _near(body(off), pal.accent, 40), body(off).name()
    assert _near(body(off), pal.window), body(off).name()
    # the label's ink is the palette's text colour: the pixel farthest from the background
    at = label.geometry()
    ink = min((image.pixelColor(x, y) for x in range(at.left(), at.right(), 2)
               for y in range(at.top(), at.bottom())),
              key=lambda c: -abs(c.lightness() - QColor(pal.window).lightness()))
    assert _near(ink, pal.text, 40), ink.name()
    assert "$" not in qapp.styleSheet(), "every placeholder in app.qss must be filled"


def test_every_placeholder_in_the_sheet_is_a_palette_field():
    text = theme.STYLE_FILE.read_text()
    names = set(re.findall(r"\$(\w+)", text))
    assert names, "the sheet uses the palette"
    assert names <= set(theme.Palette.__dataclass_fields__)


def test_system_mode_follows_the_colour_scheme(qapp):
    assert theme.resolve("system", Qt.ColorScheme.Dark) == "dark"
    assert theme.resolve("system", Qt.ColorScheme.Light) == "light"
    assert theme.resolve("system", Qt.ColorScheme.Unknown) == "light"
    assert theme.resolve("dark", Qt.ColorScheme.Light) == "dark"  # manual override wins
    expected = theme.resolve("system", qapp.styleHints().colorScheme())
    assert theme.apply_theme(qapp, "system") == expected
    with pytest.raises(ValueError, match="theme mode"):
        theme.apply_theme(qapp, "purple")


def test_switching_emits_theme_changed_and_menu_remembers(qapp, qtbot, config_dir):
    theme.apply_theme(qapp, "light")
    with qtbot.waitSignal(theme.controller().sig_theme_changed, timeout=1000) as blocker:
        theme.apply_theme(qapp, "dark")
    assert blocker.args == ["dark"]

    menu = theme.theme_menu()
    actions = {a.data(): a for a in menu.actions()}
    assert list(actions) == ["system", "light", "dark"]
    assert actions["dark"].isChecked()
    actions["light"].trigger()
    assert theme.controller().name == "light"
    assert theme.saved_mode() == "light"
    assert (config_dir / layout_state.SETTINGS_FILE).read_text().count("mode=light") == 1
    menu.deleteLater()


def test_action_icons_draw_in_the_theme_text_colour(qapp):
    names = {"open", "run", "stop", "compare", "zoom-fit", "next", "prev"}
    names |= {icon for _k, _t, _h, icon, _s in ACTIONS}
    for mode in ("light", "dark"):
        theme.apply_theme(qapp, mode)
        want = QColor(theme.palette().text)
        for name in sorted(names):
            image = theme.icon(name).pixmap(QSize(24, 24)).toImage()
            ink = [image.pixelColor(x, y) for x in range(24) for y in range(24)
                   if image.pixelColor(x, y).alpha() >= 160]
            assert len(ink) > 12, f"{name}: icon is (nearly) empty"
            for c in ink:
                assert max(abs(c.red() - want.red()), abs(c.green() - want.green()),
                           abs(c.blue() - want.blue())) <= 6, f"{name} in {mode}: {c.name()}"


def test_app_icon_has_every_size_and_is_drawn(qapp):
    sizes = sorted(s.width() for s in theme.app_icon().availableSizes())
    assert sizes == [16, 24, 32, 48, 64, 128, 256]
    image = theme.app_icon().pixmap(QSize(256, 256)).toImage()
    assert image.pixelColor(0, 0).alpha() == 0  # rounded corner stays transparent
    assert image.pixelColor(128, 128).alpha() == 255
    assert (theme.ICONS_DIR / "stallscope.svg").read_text().startswith("<svg")


@pytest.mark.runner  # the About dialog asks the interpreter for torch in a child (QProcess)
def test_about_dialog_lists_versions_and_finds_torch(qtbot, qapp):
    import numpy
    import PySide6
    from PySide6.QtCore import qVersion

    dialog = about.AboutDialog()
    qtbot.addWidget(dialog)
    assert dialog.labels["Qt"].text() == qVersion()
    assert dialog.labels["PySide6"].text() == PySide6.__version__
    assert dialog.labels["numpy"].text() == numpy.__version__
    qtbot.waitUntil(lambda: dialog.labels["torch"].text() != "looking…", timeout=60_000)
    try:
        import torch
    except ImportError:
        assert dialog.labels["torch"].text().startswith("not found")
    else:
        assert dialog.labels["torch"].text().startswith(torch.__version__)
    dialog.copy_versions()
    assert f"Qt: {qVersion()}" in QApplication.clipboard().text()


def test_about_dialog_says_when_torch_is_missing(qtbot, tmp_path):
    dialog = about.AboutDialog(interpreter=str(tmp_path / "no-such-python"))
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.labels["torch"].text() != "looking…", timeout=10_000)
    assert dialog.labels["torch"].text().startswith("not found")
    assert dialog.findChildren(QLabel)


def _window():
    win = QMainWindow()
    splitter = QSplitter()
    splitter.setObjectName("mainSplitter")
    splitter.addWidget(QLabel("a"))
    splitter.addWidget(QLabel("b"))
    win.setCentralWidget(splitter)
    for name, area in (("summary", Qt.DockWidgetArea.LeftDockWidgetArea),
                       ("advice", Qt.DockWidgetArea.RightDockWidgetArea)):
        dock = QDockWidget(name, win)
        dock.setObjectName(name)
        dock.setWidget(QLabel(name))
        win.addDockWidget(area, dock)
    return win, splitter


def test_layout_is_saved_and_restored(qtbot, config_dir):
    win, splitter = _window()
    qtbot.addWidget(win)
    assert not layout_state.restore_layout(win), "nothing saved yet"
    win.resize(700, 520)
    win.show()
    qtbot.waitExposed(win)
    advice = win.findChild(QDockWidget, "advice")
    win.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, advice)
    win.findChild(QDockWidget, "summary").hide()
    splitter.setSizes([150, 500])
    qtbot.wait(10)
    saved_sizes = splitter.sizes()
    layout_state.save_layout(win)
    win.close()
    assert (config_dir / layout_state.SETTINGS_FILE).exists()

    again, splitter2 = _window()
    qtbot.addWidget(again)
    assert layout_state.restore_layout(again)
    again.show()
    qtbot.waitExposed(again)
    assert again.size() == QSize(700, 520)
    dock = again.findChild(QDockWidget, "advice")
    assert again.dockWidgetArea(dock) == Qt.DockWidgetArea.BottomDockWidgetArea
    assert again.findChild(QDockWidget, "summary").isHidden()
    assert splitter2.sizes() == saved_sizes

    layout_state.forget_layout()
    third, _ = _window()
    qtbot.addWidget(third)
    assert not layout_state.restore_layout(third)


def test_main_window_remembers_its_layout(qtbot, config_dir):
    from stallscope.gui.main_window import MainWindow

    first = MainWindow()
    qtbot.addWidget(first)
    first.resize(720, 530)
    first.show()
    qtbot.waitExposed(first)
    default_sizes = first.analysis.splitter.sizes()
    first.analysis.splitter.setSizes([sum(default_sizes) - 420, 420])
    sizes = first.analysis.splitter.sizes()
    assert sizes != default_sizes
    size = first.size()
    first.close()  # closeEvent saves
    assert (config_dir / layout_state.SETTINGS_FILE).exists()

    second = MainWindow()
    qtbot.addWidget(second)
    second.show()
    qtbot.waitExposed(second)
    assert second.size() == size
    assert second.analysis.splitter.sizes() == sizes


def test_system_mode_reapplies_when_the_desktop_scheme_flips(qapp, qtbot, monkeypatch):
    hints = qapp.styleHints()
    scheme = {"now": Qt.ColorScheme.Light}
    monkeypatch.setattr(hints, "colorScheme", lambda: scheme["now"])
    assert theme.apply_theme(qapp, "system") == "light"
    scheme["now"] = Qt.ColorScheme.Dark
    with qtbot.waitSignal(theme.controller().sig_theme_changed, timeout=1000) as blocker:
        hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
    assert blocker.args == ["dark"]
    assert qapp.palette().color(QPalette.ColorRole.Window) == QColor(theme.PALETTES["dark"].window)
    theme.apply_theme(qapp, "light")  # a manual choice stops following the desktop
    with qtbot.assertNotEmitted(theme.controller().sig_theme_changed, wait=50):
        hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
    assert theme.controller().name == "light"
    scheme["now"] = Qt.ColorScheme.Light  # the teardown's "system" must not leave later tests dark


def test_text_is_drawn_in_the_bundled_fonts_whatever_the_desktop_has(qapp):
    """The app's font and every monospace request resolve to the DejaVu files in
    resources/fonts, also where fontconfig would pick another font (e.g. with fonts-noto-mono
    installed, "monospace" is Noto Sans Mono): reference images and screenshots match."""
    from PySide6.QtGui import QFont, QFontDatabase, QFontInfo

    assert sorted(p.name for p in theme.FONTS_DIR.glob("*.ttf")) == [
        "DejaVuSans-Bold.ttf", "DejaVuSans.ttf", "DejaVuSansMono-Bold.ttf", "DejaVuSansMono.ttf"]
    assert (theme.FONTS_DIR / "LICENSE.DejaVu").is_file()
    theme.apply_theme(qapp, "light")
    assert theme.install_fonts(qapp)
    assert QFontInfo(qapp.font()).family() == "DejaVu Sans"
    for requested in (QFont("monospace"), QFont("Monospace"),
                      QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)):
        assert QFontInfo(requested).family() == "DejaVu Sans Mono", requested.family()
    bold = QFont("DejaVu Sans")
    bold.setBold(True)
    assert QFontInfo(bold).family() == "DejaVu Sans" and QFontInfo(bold).bold()
