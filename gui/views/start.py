"""The start screen: what you can do, and what you opened lately with its headline figure.
(Long because the recent list's rows, their refreshing ages and the drop target are one layout.)

    screen = StartScreen(RecentStore())
    screen.sig_open_trace_requested.connect(...)
    screen.sig_recent_activated.connect(open_path)     # path of a recent trace or session
    screen.refresh()                                    # after the recent list changed

    python -m stallscope.gui.views.start [OUT.png]    # standalone, or render to a PNG
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import cast

from PySide6.QtCore import QPoint, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QPixmap
from PySide6.QtWidgets import (
    QApplication,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QSizePolicy,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from stallscope.core import __version__
from stallscope.core.recent import RecentItem, RecentStore
from stallscope.gui import theme
from stallscope.gui.widgets import ElidedLabel

# (key, title, hint, icon, signal attribute)
ACTIONS = (
    ("open_trace", "Open trace",
     "A torch.profiler trace: .json, .json.gz or a TensorBoard log folder", "open",
     "sig_open_trace_requested"),
    ("open_session", "Open session",
     "A folder recorded by stallscope or by stallscope-cli run", "session",
     "sig_open_session_requested"),
    ("run", "Run script",
     "Launch your training script under the profiler and watch it live", "run",
     "sig_run_requested"),
    ("demo", "Run demo",
     "Profile the bundled demo: a small training loop starved by its data", "demo",
     "sig_demo_requested"),
    ("convert", "Convert to LMDB",
     "Pack an image dataset into LMDB and measure the speed-up", "convert",
     "sig_convert_requested"),
)
PRIMARY = "open_trace"
PATH_ROLE = Qt.ItemDataRole.UserRole
AGE_REFRESH_MS = 30_000  # "N min ago" is right to the minute, twice a minute


class StartScreen(QWidget):
    sig_open_trace_requested = Signal()
    sig_open_session_requested = Signal()
    sig_run_requested = Signal()
    sig_demo_requested = Signal()
    sig_convert_requested = Signal()
    sig_recent_activated = Signal(str)
    sig_path_dropped = Signal(str)  # a file or folder dropped on the screen

    def __init__(self, store: RecentStore | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("StartScreen")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setAcceptDrops(True)
        self.store = store if store is not None else RecentStore()
        self.buttons: dict[str, ActionCard] = {}
        self.clock = time.time  # what "now" is for the ages shown
        self._build()
        self.refresh()
        # "N min ago" moves on while the screen is up (started when shown, stopped when hidden)
        self.age_timer = QTimer(self)
        self.age_timer.setInterval(AGE_REFRESH_MS)
        self.age_timer.timeout.connect(self.refresh_ages)
        theme.controller().sig_theme_changed.connect(self._on_theme_changed)

    # ---- layout ----

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(48, 40, 48, 24)
        outer.setSpacing(0)

        page = QWidget()
        page.setMaximumWidth(1080)
        column = QVBoxLayout(page)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(28)
        column.addLayout(self._build_header())

        body = QGridLayout()
        body.setHorizontalSpacing(36)
        body.setVerticalSpacing(10)
        body.addWidget(_section("START"), 0, 0)
        body.addWidget(_section("RECENT"), 0, 1)
        body.addLayout(self._build_actions(), 1, 0, Qt.AlignmentFlag.AlignTop)
        body.addLayout(self._build_recent(), 1, 1)
        body.setColumnStretch(0, 0)
        body.setColumnStretch(1, 1)
        body.setColumnMinimumWidth(0, 330)
        body.setRowStretch(1, 1)
        column.addLayout(body, 1)

        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(page, 100)
        row.addStretch(1)
        outer.addLayout(row, 1)

        footer = QLabel(
            f"stallscope {__version__}  ·  Drop a trace file or session folder here to open it"
        )
        footer.setObjectName("StartFooter")
        footer.setAlignment(Qt.AlignmentFlag.AlignCenter)
        outer.addSpacing(16)
        outer.addWidget(footer)

    def _build_header(self) -> QHBoxLayout:
        header = QHBoxLayout()
        header.setSpacing(18)
        self.logo = QLabel()
        self.logo.setPixmap(theme.app_icon().pixmap(QSize(64, 64)))
        self.logo.setFixedSize(64, 64)
        header.addWidget(self.logo, 0, Qt.AlignmentFlag.AlignVCenter)
        words = QVBoxLayout()
        words.setSpacing(2)
        title = QLabel("stallscope")
        title.setObjectName("StartTitle")
        tagline = QLabel("Why is my GPU waiting, and what do I change?")
        tagline.setObjectName("StartTagline")
        words.addStretch(1)
        words.addWidget(title)
        words.addWidget(tagline)
        words.addStretch(1)
        header.addLayout(words, 1)
        return header

    def _build_actions(self) -> QVBoxLayout:
        box = QVBoxLayout()
        box.setSpacing(8)
        for key, title, hint, icon_name, signal_name in ACTIONS:
            card = ActionCard(title, hint, icon_name, primary=key == PRIMARY)
            card.clicked.connect(getattr(self, signal_name).emit)
            self.buttons[key] = card
            box.addWidget(card)
        box.addStretch(1)
        return box

    def _build_recent(self) -> QVBoxLayout:
        box = QVBoxLayout()
        box.setSpacing(6)
        self.recent_stack = QStackedWidget()
        self.recent_list = QListWidget()
        self.recent_list.setObjectName("RecentList")
        self.recent_list.setVerticalScrollMode(QListWidget.ScrollMode.ScrollPerPixel)
        self.recent_list.setSelectionMode(QListWidget.SelectionMode.SingleSelection)
        # rows take the list's width and elide what does not fit (the tooltip has the path):
        # never a sideways scroll
        self.recent_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.recent_list.setResizeMode(QListWidget.ResizeMode.Adjust)
        self.recent_list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.recent_list.itemActivated.connect(self._activate)
        self.recent_list.itemClicked.connect(self._activate)
        self.recent_list.customContextMenuRequested.connect(self._recent_menu)
        self.empty_state = _empty_state()
        self.recent_stack.addWidget(self.recent_list)
        self.recent_stack.addWidget(self.empty_state)
        box.addWidget(self.recent_stack, 1)

        links = QHBoxLayout()
        links.addStretch(1)
        self.clear_button = QPushButton("Clear list")
        self.clear_button.setObjectName("LinkButton")
        self.clear_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.clear_button.clicked.connect(self.clear_recent)
        links.addWidget(self.clear_button)
        box.addLayout(links)
        return box

    # ---- recent items ----

    def refresh(self) -> None:
        """Re-read the recent list from its store."""
        self.recent_list.clear()
        now = self.clock()
        items = self.store.items()
        for item in items:
            row = RecentRow(item, now)
            entry = QListWidgetItem(self.recent_list)
            entry.setData(PATH_ROLE, item.path)
            entry.setToolTip(item.path if item.exists else f"{item.path}\n(not found)")
            entry.setSizeHint(row.sizeHint())
            self.recent_list.setItemWidget(entry, row)
        self.recent_stack.setCurrentWidget(self.recent_list if items else self.empty_state)
        self.clear_button.setVisible(bool(items))

    def refresh_ages(self) -> None:
        """Each recent row's "N min ago" as of now (the list itself is not re-read)."""
        now = self.clock()
        for i in range(self.recent_list.count()):
            row = self.recent_list.itemWidget(self.recent_list.item(i))
            if isinstance(row, RecentRow):
                row.when_label.setText(ago(row.item.opened, now))

    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        self.refresh_ages()
        self.age_timer.start()

    def hideEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().hideEvent(event)
        self.age_timer.stop()

    def recent_paths(self) -> list[str]:
        return [self.recent_list.item(i).data(PATH_ROLE) for i in range(self.recent_list.count())]

    def clear_recent(self) -> None:
        self.store.clear()
        self.refresh()

    def remove_recent(self, path: str) -> None:
        self.store.remove(path)
        self.refresh()

    def set_shortcut_hints(self, hints: dict[str, str]) -> None:
        """Show the main window's shortcuts on the cards, e.g. {"open_trace": "Ctrl+O"}."""
        for key, text in hints.items():
            if key in self.buttons:
                self.buttons[key].set_key_hint(text)

    def _activate(self, entry: QListWidgetItem) -> None:
        path = entry.data(PATH_ROLE)
        if path and Path(path).exists():
            self.sig_recent_activated.emit(path)

    def _recent_menu(self, pos: QPoint) -> None:
        entry = self.recent_list.itemAt(pos)
        if entry is None:
            return
        menu = QMenu(self)
        remove = menu.addAction(theme.icon("remove"), "Remove from list")
        chosen = menu.exec(self.recent_list.viewport().mapToGlobal(pos))
        if chosen is remove:
            self.remove_recent(entry.data(PATH_ROLE))

    # ---- drag and drop ----

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt API
        if any(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt API
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.sig_path_dropped.emit(paths[0])

    def _on_theme_changed(self, _name: str) -> None:
        for card in self.buttons.values():
            card.refresh_icon()
        self.refresh()


class ActionCard(QToolButton):
    """A big button: icon, title, a one-line hint and (optionally) its shortcut."""

    def __init__(self, title: str, hint: str, icon_name: str, primary: bool = False) -> None:
        super().__init__()
        self.primary = primary
        self.icon_name = icon_name
        self.setObjectName("StartPrimary" if primary else "StartAction")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setAccessibleName(title)
        self.setToolTip(hint)

        layout = self.box = QHBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.setSpacing(12)
        self.glyph = QLabel()
        self.glyph.setFixedSize(24, 24)
        layout.addWidget(self.glyph, 0, Qt.AlignmentFlag.AlignVCenter)
        words = QVBoxLayout()
        words.setSpacing(1)
        self.title_label = QLabel(title)
        self.title_label.setObjectName("PrimaryTitle" if primary else "ActionTitle")
        self.hint_label = QLabel(hint)
        self.hint_label.setObjectName("PrimaryHint" if primary else "ActionHint")
        self.hint_label.setWordWrap(True)
        words.addWidget(self.title_label)
        words.addWidget(self.hint_label)
        layout.addLayout(words, 1)
        self.key_label = QLabel()
        self.key_label.setObjectName("PrimaryKey" if primary else "ActionKey")
        self.key_label.hide()
        layout.addWidget(self.key_label, 0, Qt.AlignmentFlag.AlignTop)
        for label in (self.glyph, self.title_label, self.hint_label, self.key_label):
            label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents, True)
        self.refresh_icon()

    def set_key_hint(self, text: str) -> None:
        self.key_label.setText(text)
        self.key_label.setVisible(bool(text))

    def refresh_icon(self) -> None:
        pal = theme.palette()
        color = pal.accent_text if self.primary else pal.accent
        self.glyph.setPixmap(theme.icon(self.icon_name, color).pixmap(QSize(24, 24)))

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return self.box.sizeHint().expandedTo(QSize(280, 60))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return self.box.minimumSize()

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt API
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt API
        return max(60, self.box.totalHeightForWidth(width))


class RecentRow(QWidget):
    """One recent item: name and age, its headline figure, and where it lives."""

    def __init__(self, item: RecentItem, now: float) -> None:
        super().__init__()
        self.item = item
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 8, 12, 8)
        layout.setSpacing(12)
        glyph = QLabel()
        pal = theme.palette()
        color = pal.text_dim if item.exists else pal.text_faint
        glyph.setPixmap(theme.icon("session" if item.kind == "session" else "trace", color)
                        .pixmap(QSize(20, 20)))
        glyph.setFixedSize(20, 20)
        layout.addWidget(glyph, 0, Qt.AlignmentFlag.AlignTop)

        words = QVBoxLayout()
        words.setSpacing(2)
        top = QHBoxLayout()
        top.setSpacing(8)
        # a file name can look like HTML (`<img src=...>` reads that file): plain text only
        # (ElidedLabel is); a long name or folder is cut in the middle, where it says least
        self.name_label = ElidedLabel(item.name, mode=Qt.TextElideMode.ElideMiddle)
        self.name_label.setObjectName("RecentName")
        top.addWidget(self.name_label, 1)
        self.when_label = QLabel(ago(item.opened, now))
        self.when_label.setObjectName("RecentWhen")
        top.addWidget(self.when_label)
        words.addLayout(top)

        if not item.exists:
            text, name = "Not found: moved or deleted (right-click to remove)", "RecentMissing"
        elif item.headline:
            text, name = item.headline, "RecentHeadline"
        else:
            text, name = "Not analysed yet", "RecentHeadlineNone"
        self.headline_label = ElidedLabel(text)
        self.headline_label.setObjectName(name)
        words.addWidget(self.headline_label)
        self.path_label = ElidedLabel(_short_path(str(Path(item.path).parent)),
                                      mode=Qt.TextElideMode.ElideMiddle)
        self.path_label.setObjectName("RecentPath")
        words.addWidget(self.path_label)
        layout.addLayout(words, 1)
        for child in self.findChildren(QLabel):
            child.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents, True)


def ago(then: float, now: float) -> str:
    seconds = max(0.0, now - then)
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    if seconds < 2 * 86400:
        return "yesterday"
    if seconds < 14 * 86400:
        return f"{int(seconds // 86400)} days ago"
    return time.strftime("%d %b %Y", time.localtime(then))


def _short_path(path: str) -> str:
    """The home folder as "~" (the label elides the rest to its width)."""
    home = str(Path.home())
    if home != "/" and path.startswith(home + "/"):
        path = "~" + path[len(home):]
    return path


def _section(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("SectionLabel")
    return label


def _empty_state() -> QWidget:
    box = QWidget()
    box.setObjectName("EmptyState")
    box.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
    layout = QVBoxLayout(box)
    layout.setContentsMargins(32, 32, 32, 32)
    layout.setSpacing(8)
    layout.addStretch(1)
    glyph = QLabel()
    glyph.setPixmap(theme.icon("recent", theme.palette().text_faint).pixmap(QSize(32, 32)))
    glyph.setAlignment(Qt.AlignmentFlag.AlignCenter)
    title = QLabel("Nothing opened yet")
    title.setObjectName("EmptyTitle")
    title.setAlignment(Qt.AlignmentFlag.AlignCenter)
    text = QLabel(
        "Open a trace or run the demo to see where your GPU waits.\n"
        "Traces and sessions you open show up here with their headline figure."
    )
    text.setObjectName("EmptyText")
    text.setAlignment(Qt.AlignmentFlag.AlignCenter)
    text.setWordWrap(True)
    for w in (glyph, title, text):
        layout.addWidget(w)
    layout.addStretch(1)
    return box


def render(out: str, mode: str = "system", size: tuple[int, int] = (1100, 680)) -> QPixmap:
    """Render a start screen (with the current recent list) into a PNG."""
    app = cast(QApplication, QApplication.instance() or QApplication(sys.argv[:1]))
    theme.apply_theme(app, mode)
    screen = StartScreen()
    screen.resize(*size)
    screen.show()
    app.processEvents()
    pixmap = screen.grab()
    pixmap.save(out)
    screen.close()
    return pixmap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    app = cast(QApplication, QApplication.instance() or QApplication(sys.argv[:1]))
    if argv:
        render(argv[0], argv[1] if len(argv) > 1 else "system")
        return 0
    theme.apply_theme(app, theme.saved_mode())
    QApplication.setWindowIcon(theme.app_icon())
    screen = StartScreen()
    screen.sig_recent_activated.connect(print)
    screen.resize(1100, 680)
    screen.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
