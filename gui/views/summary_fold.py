"""The cards a report withholds (a window that is not steady, a trace that recorded too little,
a cause the trace cannot know), folded under one line: "If this were steady: 3 cards withheld
(a start-up window)". Unfolded they read as the cards would, dimmed and not clickable."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QToolButton, QVBoxLayout, QWidget

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
        self.toggle.toggled.connect(self._show)
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
        self.toggle.setText(f"If this were steady: {n} withheld ({reason})")
        self.toggle.setToolTip("Steady-state advice, not for this window: click to show it")
        self.toggle.setChecked(False)
        self._show(False)
        self.setVisible(bool(withheld))

    def _show(self, on: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.body.setVisible(on)
