"""Light and dark themes: a QPalette, the style sheet resources/style/app.qss and themed icons.

`apply_theme(app, "system")` follows the desktop's colour scheme (QStyleHints.colorScheme())
and re-applies itself when it changes; "light" / "dark" override it. The chosen mode is kept in
the settings file, and `theme_menu()` gives the View > Theme menu that switches it.

    apply_theme(app, saved_mode())
    action.setIcon(icon("run"))
    controller().sig_theme_changed.connect(view.on_theme)   # views that draw their own colours
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from string import Template

from PySide6.QtCore import QByteArray, QObject, QRectF, Qt, Signal
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QColor,
    QFont,
    QFontDatabase,
    QIcon,
    QImage,
    QPainter,
    QPalette,
    QPixmap,
)
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QApplication, QMenu, QWidget

from stallscope.resources import RESOURCES

MODES = ("system", "light", "dark")
ICONS_DIR = RESOURCES / "icons"
STYLE_FILE = RESOURCES / "style" / "app.qss"
FONTS_DIR = RESOURCES / "fonts"  # DejaVu Sans (Mono), from Debian's fonts-dejavu-core
UI_FONT, MONO_FONT = "DejaVu Sans", "DejaVu Sans Mono"
MONO_ALIASES = ("monospace", "Monospace", "Mono", "Courier", "Courier New")
APP_ICON = "stallscope"


@dataclass(frozen=True)
class Palette:
    name: str
    window: str  # page background
    surface: str  # cards, lists, inputs
    surface_hover: str
    surface_pressed: str
    border: str
    border_strong: str
    text: str
    text_dim: str
    text_faint: str
    accent: str
    accent_text: str  # text drawn on accent
    accent_soft: str  # selection / hover tint
    warn: str  # idle / stall highlights
    plot_bg: str
    plot_fg: str


PALETTES = {
    "light": Palette(
        name="light", window="#f4f5f7", surface="#ffffff", surface_hover="#eef3fd",
        surface_pressed="#dfe8fb", border="#dde1e7", border_strong="#c3c9d2", text="#1d2229",
        text_dim="#5b6470", text_faint="#8a929c", accent="#2563eb", accent_text="#ffffff",
        accent_soft="#dbe6fd", warn="#c2570c", plot_bg="#ffffff", plot_fg="#3b424c",
    ),
    "dark": Palette(
        name="dark", window="#1b1d21", surface="#25282d", surface_hover="#2c3440",
        surface_pressed="#303b4d", border="#353940", border_strong="#4a4f58", text="#e7e9ec",
        text_dim="#a3aab4", text_faint="#767e89", accent="#5b9bff", accent_text="#0d1320",
        accent_soft="#27395a", warn="#ffa04d", plot_bg="#17191c", plot_fg="#c9ced6",
    ),
}


class ThemeController(QObject):
    """Holds the current mode; re-applies the theme when the system scheme flips."""

    sig_theme_changed = Signal(str)  # "light" | "dark"

    def __init__(self) -> None:
        super().__init__()
        self.mode = "system"
        self.name = "light"
        self._app: QApplication | None = None
        self._applying = False

    def apply(self, app: QApplication, mode: str, plots: bool = True) -> str:
        if mode not in MODES:
            raise ValueError(f"theme mode must be one of {MODES}, not {mode!r}")
        if self._app is not app:
            self._app = app
            app.styleHints().colorSchemeChanged.connect(self._on_system_scheme)
            install_fonts(app)
        self.mode = mode
        self._applying = True
        try:
            hints = app.styleHints()
            hints.unsetColorScheme()  # read the desktop's own scheme, not our last override
            name = resolve(mode, hints.colorScheme())
            if mode != "system":
                # Native dialogs and title bars follow the override too (Qt >= 6.8).
                hints.setColorScheme(_SCHEMES[name])
            _apply_palette(app, PALETTES[name], plots)
        finally:
            self._applying = False
        changed = name != self.name
        self.name = name
        _icon_cache.clear()
        if changed:
            self.sig_theme_changed.emit(name)
        return name

    def _on_system_scheme(self, scheme: Qt.ColorScheme) -> None:
        if self._applying or self.mode != "system" or self._app is None:
            return
        self.apply(self._app, "system")


_SCHEMES = {"light": Qt.ColorScheme.Light, "dark": Qt.ColorScheme.Dark}
_controller: ThemeController | None = None
_icon_cache: dict[tuple[str, str, int], QIcon] = {}


def controller() -> ThemeController:
    global _controller
    if _controller is None:
        _controller = ThemeController()
    return _controller


def resolve(mode: str, scheme: Qt.ColorScheme = Qt.ColorScheme.Unknown) -> str:
    """The palette name a mode means under the given system scheme (Unknown reads as light)."""
    if mode in PALETTES:
        return mode
    return "dark" if scheme == Qt.ColorScheme.Dark else "light"


def apply_theme(app: QApplication, mode: str = "system", plots: bool = True) -> str:
    """Style the whole app; returns the palette applied ("light" or "dark"). plots=False leaves
    pyqtgraph unimported (the app's start-up: apply_plot_colors() once it is)."""
    return controller().apply(app, mode, plots)


def apply_plot_colors() -> None:
    """New pyqtgraph plots in the current palette's colours."""
    _apply_plot_colors(palette())


def install_fonts(app: QApplication) -> bool:
    """All text in the bundled DejaVu fonts (resources/fonts), so that the app, its screenshots
    and the reference images look alike on every desktop, whatever fonts it has installed:
    the app's font is DejaVu Sans, "monospace" and the fixed system font mean DejaVu Sans Mono.
    False (the desktop's fonts stay) when the files cannot be loaded."""
    loaded = [QFontDatabase.addApplicationFont(str(p)) for p in sorted(FONTS_DIR.glob("*.ttf"))]
    if not loaded or min(loaded) < 0:
        return False
    for alias in MONO_ALIASES + (QFontDatabase.systemFont(
            QFontDatabase.SystemFont.FixedFont).family(),):
        QFont.removeSubstitutions(alias)
        QFont.insertSubstitution(alias, MONO_FONT)
    font = QFont(app.font())
    font.setFamilies([UI_FONT])
    app.setFont(font)
    return True


def palette() -> Palette:
    return PALETTES[controller().name]


def style_sheet(pal: Palette) -> str:
    return Template(STYLE_FILE.read_text(encoding="utf-8")).substitute(asdict(pal))


def saved_mode() -> str:
    from stallscope.gui.layout_state import settings

    mode = settings().value("theme/mode", "system")
    return mode if mode in MODES else "system"


def save_mode(mode: str) -> None:
    from stallscope.gui.layout_state import settings

    store = settings()
    store.setValue("theme/mode", mode)
    store.sync()


def theme_menu(parent: QWidget | None = None) -> QMenu:
    """View > Theme: System / Light / Dark, applied at once and remembered."""
    menu = QMenu("&Theme", parent)
    group = QActionGroup(menu)
    for mode in MODES:
        action = QAction(mode.capitalize(), menu)
        action.setCheckable(True)
        action.setChecked(mode == controller().mode)
        action.setData(mode)
        group.addAction(action)
        menu.addAction(action)
    group.triggered.connect(lambda a: _switch(a.data()))
    return menu


def _switch(mode: str) -> None:
    app = QApplication.instance()
    if isinstance(app, QApplication):
        apply_theme(app, mode)
        save_mode(mode)


def icon(name: str, color: str | None = None) -> QIcon:
    """An action icon from resources/icons/<name>.svg in the theme's text colour (or `color`);
    "stallscope" gives the app icon with all its PNG sizes."""
    if name == APP_ICON:
        return app_icon()
    color = color or palette().text
    key = (name, color, 0)
    if key not in _icon_cache:
        svg = (ICONS_DIR / f"{name}.svg").read_text(encoding="utf-8")
        renderer = QSvgRenderer(QByteArray(svg.replace("currentColor", color).encode()))
        result = QIcon()
        for size in (16, 20, 24, 32, 48, 64):
            result.addPixmap(_render(renderer, size))
        disabled = QColor(color)
        disabled.setAlphaF(0.35)
        dim = QSvgRenderer(QByteArray(svg.replace("currentColor", disabled.name(
            QColor.NameFormat.HexArgb)).encode()))
        for size in (16, 24, 32):
            result.addPixmap(_render(dim, size), QIcon.Mode.Disabled)
        _icon_cache[key] = result
    return _icon_cache[key]


def app_icon() -> QIcon:
    result = QIcon()
    for png in sorted(ICONS_DIR.glob(f"{APP_ICON}-*.png")):
        result.addFile(str(png))
    return result


def _render(renderer: QSvgRenderer, size: int) -> QPixmap:
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return QPixmap.fromImage(image)


def _apply_palette(app: QApplication, pal: Palette, plots: bool = True) -> None:
    # Each of these re-polishes every widget alive (~0.2 s with a main window open), so a
    # switch to the colours already shown (light -> system on a light desktop) changes nothing.
    if app.property("stallscope_style") != "Fusion":  # (style() answers a style-sheet wrapper)
        app.setStyle("Fusion")  # the one style that honours a custom palette on every platform
        app.setProperty("stallscope_style", "Fusion")
    qp = QPalette()
    role = QPalette.ColorRole
    group = QPalette.ColorGroup
    for r, value in (
        (role.Window, pal.window), (role.WindowText, pal.text), (role.Base, pal.surface),
        (role.AlternateBase, pal.window), (role.Text, pal.text), (role.Button, pal.surface),
        (role.ButtonText, pal.text), (role.ToolTipBase, pal.surface), (role.ToolTipText, pal.text),
        (role.PlaceholderText, pal.text_faint), (role.Highlight, pal.accent),
        (role.HighlightedText, pal.accent_text), (role.Link, pal.accent),
        (role.LinkVisited, pal.accent), (role.BrightText, pal.warn), (role.Light, pal.surface),
        (role.Midlight, pal.border), (role.Mid, pal.border_strong), (role.Dark, pal.border_strong),
        (role.Shadow, "#000000"), (role.Accent, pal.accent),
    ):
        qp.setColor(r, QColor(value))
    for r in (role.WindowText, role.Text, role.ButtonText):
        qp.setColor(group.Disabled, r, QColor(pal.text_faint))
    if app.palette() != qp:
        app.setPalette(qp)
    sheet = style_sheet(pal)
    if app.styleSheet() != sheet:
        app.setStyleSheet(sheet)
    if plots:
        _apply_plot_colors(pal)


def _apply_plot_colors(pal: Palette) -> None:
    # New pyqtgraph plots pick these up; views that outlive a switch listen to sig_theme_changed.
    try:
        import pyqtgraph as pg
    except ImportError:
        return
    pg.setConfigOptions(background=pal.plot_bg, foreground=pal.plot_fg)
