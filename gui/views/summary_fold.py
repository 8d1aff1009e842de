"""The cards a report withholds (a window that is not steady, a trace that recorded too little,
a cause the trace cannot know), folded under one line: "If this were steady: 3 cards withheld
(a start-up window)". Unfolded they read as the cards would, dimmed and not clickable."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QSizePolicy, QToolButton, QVBoxLayout, QWidget

from stallscope.core import units
from stallscope.core.report import Advice
from stallscope.gui.views.summary_parts import AdviceCard


class WithheldFold(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 4, 0, 0)
        box.setSpacing(4)
        self.toggle = QToolButton()
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        # the panel's width, not the text's: a line wider than the panel pushed every figure
        # of the summary past its right edge (the panel never scrolls sideways); it elides
        self.toggle.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.toggle.toggled.connect(self._show)
        self._text = ""
        self.body = QWidget()
        self.cards_box = QVBoxLayout(self.body)
        self.cards_box.setContentsMargins(12, 0, 0, 0)
        self.cards_box.setSpacing(6)
        box.addWidget(self.toggle)
        box.addWidget(self.body)
        self.cards: list[AdviceCard] = []
        self._show(False)

    def set_cards(self, withheld: list[Advice], colors: dict, reason: str) -> None:
        """The withheld cards, folded; `reason`: why ("a start-up window")."""
        for card in self.cards:
            card.setParent(None)
            card.deleteLater()
        self.cards = []
        for advice in withheld:
            card = AdviceCard(advice.title, advice.evidence, advice.fix, colors,
                              clickable=False, minor=advice.minor,
                              culprits=[c.text for c in advice.culprits])
            self.cards_box.addWidget(card)
            self.cards.append(card)
        n = units.plural(len(withheld), "card")
        self._text = f"If this were steady: {n} withheld ({reason})"
        self.toggle.setToolTip(f"{self._text}. Steady-state advice, not for this window: "
                               "click to show it")
        self._fit()
        self.toggle.setChecked(False)
        self._show(False)
        self.setVisible(bool(withheld))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        """The line, elided to the width the button has beside its arrow."""
        room = self.toggle.width() - self.toggle.iconSize().width() - 16
        metrics = self.toggle.fontMetrics()
        self.toggle.setText(metrics.elidedText(self._text, Qt.TextElideMode.ElideRight,
                                               max(room, metrics.averageCharWidth() * 8)))

    def _show(self, on: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.body.setVisible(on)
