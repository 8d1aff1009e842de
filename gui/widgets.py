"""Small widgets the views share: a label that elides instead of clipping, the message strip,
and the one way untrusted text reaches the screen.

Untrusted text (names from a trace, a session, a file or a dataset) is plain text. Qt renders a
label or tooltip as HTML when its text merely looks like HTML, and an `<img src="file:...">` in
a file name makes it read that file (/dev/zero: until memory runs out). So:

    set_rich(label, "<b>{}</b> · {}", title, path)   # deliberate rich text: the values escaped
    rich_label("<b>Fix:</b> {}", fix)                # the same, a new QLabel
    rich("<b>{}</b>", name) -> str                   # the escaped HTML (message boxes)
    set_rich_tooltip(widget, "<b>{}</b>", name)      # a deliberate rich tooltip
    install_plain_text_guard(app)                    # app.py and the GUI tests: safe by default

The guard makes every label plain text when it is polished (before it is first shown and sized)
unless set_rich marked it, and shows every tooltip that looks like HTML as plain text unless
set_rich_tooltip marked its widget: a view that forgets gets literal tags, never a rendered
(or loaded) resource.
"""

from __future__ import annotations

import html
import re
from typing import cast

from PySide6.QtCore import QEvent, QObject, QSize, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtGui import Qt as QtText  # mightBeRichText, convertFromPlainText
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QFrame,
    QGraphicsScene,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QSizePolicy,
    QTabBar,
    QToolButton,
    QToolTip,
    QWidget,
    QWizard,
)

from stallscope.gui.colors import follow_theme, message_colors

RICH = "stallscope_rich"          # a label whose text set_rich built (its values escaped)
RICH_TIP = "stallscope_rich_tip"  # a widget whose tooltip set_rich_tooltip built


# ---------------------------------------------------------------------------------------------
# Untrusted text


def rich(template: str, *values, **named) -> str:
    """`template` (trusted HTML, `{}` fields) with every value escaped as plain text. Without
    values the template is taken as it is (HTML whose untrusted parts were escaped already)."""
    if not values and not named:
        return template
    esc = [html.escape(str(v)) for v in values]
    return template.format(*esc, **{k: html.escape(str(v)) for k, v in named.items()})


def set_rich(label: QLabel, template: str, *values, **named) -> QLabel:
    label.setProperty(RICH, True)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setText(rich(template, *values, **named))
    return label


def rich_label(template: str, *values, parent: QWidget | None = None, **named) -> QLabel:
    return set_rich(QLabel(parent), template, *values, **named)


def plain_label(text: str = "", parent: QWidget | None = None) -> QLabel:
    label = QLabel(parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(text)
    return label


def wrap_to_width(label: QLabel) -> QLabel:
    """Word-wrapped, as wide as its panel gives (never widening it), as tall as its lines at
    that width. setSizePolicy after setWordWrap would drop the height-for-width that wrapping
    needs: the label then takes its text's height at a narrow guessed width (5 lines for one),
    its text centred in the room, an empty band above it."""
    label.setWordWrap(True)
    policy = QSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    policy.setHeightForWidth(True)
    label.setSizePolicy(policy)
    return label


def set_rich_tooltip(widget: QWidget, template: str, *values, **named) -> None:
    widget.setProperty(RICH_TIP, True)
    widget.setToolTip(rich(template, *values, **named))


def plain_tooltip(text: str) -> str:
    """What QToolTip shows for `text` as it is: escaped, its line breaks kept."""
    return QtText.convertFromPlainText(text, Qt.WhiteSpaceMode.WhiteSpaceNormal)


class PlainTextGuard(QObject):
    """An application event filter: labels are plain text unless set_rich made them, tooltips
    that look like HTML are shown as text unless set_rich_tooltip made them."""

    _WATCHED = frozenset({QEvent.Type.Polish, QEvent.Type.ParentChange, QEvent.Type.ToolTip,
                          QEvent.Type.GraphicsSceneHelp})

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        kind = event.type()
        if kind not in self._WATCHED:  # every event of the app passes here: leave at once
            return False
        if kind in (QEvent.Type.Polish, QEvent.Type.ParentChange):  # ParentChange: a label put
            # in a layout, which may be sized (sizeHint) before it is ever shown or polished
            if isinstance(obj, QLabel) and not obj.property(RICH) and not _is_tip_label(obj):
                obj.setTextFormat(Qt.TextFormat.PlainText)
            elif isinstance(obj, QWizard) and not obj.property(RICH):  # its header labels
                obj.setTitleFormat(Qt.TextFormat.PlainText)
                obj.setSubTitleFormat(Qt.TextFormat.PlainText)
        elif kind == QEvent.Type.ToolTip and isinstance(obj, QWidget):
            text = _widget_tip(obj, event.pos())
            if text is not None and QtText.mightBeRichText(text):
                QToolTip.showText(event.globalPos(), plain_tooltip(text), obj)
                return True
        elif kind == QEvent.Type.GraphicsSceneHelp and isinstance(obj, QGraphicsScene):
            item = next((i for i in obj.items(event.scenePos()) if i.toolTip()), None)
            marked = item is not None and hasattr(item, "property") and item.property(RICH_TIP)
            if item is not None and not marked and QtText.mightBeRichText(item.toolTip()):
                QToolTip.showText(event.screenPos(), plain_tooltip(item.toolTip()),
                                  event.widget())
                event.accept()
                return True
        return False


def _is_tip_label(label: QLabel) -> bool:
    """QToolTip's own label: what it shows was decided at the ToolTip event (plain_tooltip)."""
    return label.metaObject().className() == "QTipLabel"


def _widget_tip(w: QWidget, pos) -> str | None:
    """The tooltip Qt would show at `pos` of `w`, None when it is a deliberate rich one (or the
    widget shows none of its own)."""
    parent = w.parentWidget()
    if isinstance(parent, QAbstractItemView) and w is parent.viewport():
        model = parent.model()
        if model is None:
            return None
        if isinstance(parent, QHeaderView):
            section = parent.logicalIndexAt(pos)
            tip = model.headerData(section, parent.orientation(),
                                   Qt.ItemDataRole.ToolTipRole) if section >= 0 else None
        else:
            index = parent.indexAt(pos)
            tip = index.data(Qt.ItemDataRole.ToolTipRole) if index.isValid() else None
        return tip if isinstance(tip, str) else None
    if w.property(RICH_TIP):
        return None
    if isinstance(w, QTabBar):
        i = w.tabAt(pos)
        return w.tabToolTip(i) if i >= 0 else None
    if isinstance(w, QMenu):
        action = w.actionAt(pos)
        return action.toolTip() if action is not None and w.toolTipsVisible() else None
    return w.toolTip()


def install_plain_text_guard(app: QApplication | None = None) -> PlainTextGuard:
    """The guard on the application (once; later calls return the same one)."""
    app = app or cast(QApplication, QApplication.instance())
    guard = getattr(app, "_stallscope_plain_text_guard", None)
    if guard is None:
        guard = PlainTextGuard(app)
        app.installEventFilter(guard)
        app._stallscope_plain_text_guard = guard  # type: ignore[attr-defined]  # kept on the app
    return guard


# ---------------------------------------------------------------------------------------------
# Widgets


BREAK_AFTER = "#(/:,>=)"


def breakable(text: str, longer_than: int = 24) -> str:
    """`text` with zero-width break points inside words longer than `longer_than` (after
    punctuation, before a ".", at a camelCase step), so that a wrapping label breaks an event
    name such as enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ instead of
    clipping it."""
    def split(word: re.Match) -> str:
        w = word.group(0)
        if len(w) <= longer_than:
            return w
        return _BREAK.sub("\u200b", w)
    return re.sub(r"\S+", split, text)


_BREAK = re.compile(rf"(?<=[{re.escape(BREAK_AFTER)}])(?=[^{re.escape(BREAK_AFTER)}])"
                    r"|(?<=\w)(?=\.)|(?<=[a-z])(?=[A-Z])")


class ElidedLabel(QLabel):
    """One line of plain text that ends in "…" when it does not fit, the whole text in its
    tooltip. It never asks for more width than it gets, so it never widens a panel."""

    def __init__(self, text: str = "", parent: QWidget | None = None,
                 mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight) -> None:
        super().__init__(parent)
        self._full = ""
        self._mode = mode
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(0)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt API
        self._full = text
        self._elide()

    def full_text(self) -> str:
        return self._full

    def is_elided(self) -> bool:
        return super().text() != self._full

    def _elide(self) -> None:
        metrics = QFontMetrics(self.font())
        width = max(self.contentsRect().width(), 0)
        shown = metrics.elidedText(self._full, self._mode, width) if width else self._full
        super().setText(shown)
        self.setToolTip(self._full if shown != self._full else "")

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._elide()

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().changeEvent(event)
        self._elide()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(0, super().minimumSizeHint().height())


class MessagePanel(QFrame):
    """A non-modal strip above the content for errors and notes (never a traceback dialog)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = plain_label()  # errors name files: never rich text
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.clicked.connect(self.hide)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 6, 6)
        row.addWidget(self.label, 1)
        row.addWidget(close)
        self.level = "info"
        self.hide()
        follow_theme(self._restyle)

    def show_message(self, text: str, level: str = "error") -> None:
        self.label.setText(text)
        self.level = level
        self._restyle()
        self.show()

    def add_message(self, text: str, level: str = "error") -> None:
        """Another line under the one shown (what else the same open found), or the message
        alone when none is shown; the strip takes the graver level of the two."""
        if not self.isVisible() or not self.label.text():
            self.show_message(text, level)
            return
        if text not in self.label.text():
            self.label.setText(f"{self.label.text()}\n{text}")
        graver = "error" if "error" in (self.level, level) else level
        self.show_message(self.label.text(), graver)

    def _restyle(self, _theme_name: str = "") -> None:
        bg, fg = message_colors(self.level)
        self.setStyleSheet(f"MessagePanel {{ background: {bg}; border: 1px solid {fg}; "
                           f"border-radius: 4px; }} QLabel, QToolButton {{ color: {fg}; }}")

    @property
    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""
