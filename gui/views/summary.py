"""Summary panel: utilization, idle by cause, the top advice, per-step bars, more advice, memory.

Built so the first screen (1400x900) shows utilization, the causes, the top card and the
per-step chart; it scrolls below that and never widens (labels wrap or elide). On a trace
without a GPU it speaks of step time and threads: the main thread's step time by cause and the
other threads that were busy during the steps (e.g. gloo collectives), with one short note.

Clicking a cause (bar segment or row) emits sig_cause_activated(cause); clicking a card emits
sig_advice_activated(index into report.advice). The window zooms the timeline to match.

Standalone: `python -m stallscope.gui.views.summary TRACE [--screenshot OUT.png]`.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QLabel,
    QProgressBar,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from stallscope.core import units
from stallscope.core.compare import covered_in, primary_device, step_breakdown
from stallscope.core.render.facts import (
    facts_text,
    memory_facts,
    no_memory_text,
    window_text,
    withheld_reason,
)
from stallscope.core.report import Report
from stallscope.gui import lanes as lane_model
from stallscope.gui.colors import (
    BUSY_COLOR,
    CAUSE_COLORS,
    NOT_CPU_STATES,
    OTHER_THREAD_COLOR,
    error_text,
    follow_theme,
    plot_theme,
    warning_colors,
)
from stallscope.gui.views.summary_fold import WithheldFold
from stallscope.gui.views.summary_parts import (
    AdviceCard,
    CauseBar,
    CauseTable,
    Heading,
    StepChart,
    parts_legend,
    shrinkable,
)
from stallscope.gui.widgets import ElidedLabel, rich, rich_label, set_rich, set_rich_tooltip

CPU_NOTE = ("No GPU activity in this trace: the figures are the main thread's step time and "
            "the other threads busy during the steps.")


def ceiling_text(report: Report, dev: int | None) -> str:
    """"Ceiling: up to 1.51x faster if the GPU never waited for data" (the largest of `dev`);
    a cause that is the whole step has no finite ceiling and is said as such; nothing below
    0.5%; none quoted for a window that is not steady training (start-up, one step) or a trace
    that recorded too little."""
    if not report.advisable:
        return f"Ceilings withheld for {withheld_reason(report)}."
    ceilings = [c for c in report.quoted_ceilings if c.device == dev]
    best = max(ceilings, key=lambda c: c.speedup, default=None)
    if best is None or best.speedup <= 1.005:
        return ""
    if not math.isfinite(best.speedup):
        return best.text[:1].upper() + best.text[1:] + "."
    return f"Ceiling: {best.text}"


# What a card can do besides showing its span (with actions=True, the analysis view's panel):
# rule id -> buttons (action, text, tip), and phrases of its fix made links to an action.
CARD_ACTIONS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "dataloader_bound": (
        ("try_it", "Try it…", "Tune the DataLoader on your script: short measured trials with "
                              "other settings, no code edits; then compare before/after"),
        ("lmdb", "Convert to LMDB…", "The LMDB wizard, with your script's Dataset as the "
                                     "source"),
    ),
}
CARD_ACTIONS["pageable_h2d"] = CARD_ACTIONS["dataloader_bound"][:1]  # pin_memory is a --set
CARD_ACTIONS["dataset_line"] = CARD_ACTIONS["dataloader_bound"][1:]   # the LMDB wizard
CARD_LINKS = {"dataloader_bound": {"LMDB wizard": "lmdb"}, "dataset_line": {"LMDB wizard": "lmdb"}}


def card_actions(advice) -> tuple:
    """The card's buttons; the LMDB wizard's only where the fix speaks of it (a hot line that
    decodes images, not one that converts to float)."""
    return tuple(a for a in CARD_ACTIONS.get(advice.id, ())
                 if a[0] != "lmdb" or "LMDB wizard" in advice.fix)


class SummaryPanel(QScrollArea):
    sig_cause_activated = Signal(str)
    sig_advice_activated = Signal(int)
    sig_advice_action = Signal(str, int)  # action (CARD_ACTIONS), index into report.advice

    def __init__(self, parent: QWidget | None = None, compact: bool = False,
                 actions: bool = False) -> None:
        super().__init__(parent)
        self.compact = compact
        self.show_actions = actions  # not `actions`: that would shadow QWidget.actions()
        self.report: Report | None = None
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget()
        body.setMinimumWidth(0)
        self.setWidget(body)
        self.box = QVBoxLayout(body)
        self.box.setContentsMargins(10, 6, 10, 10)
        self.box.setSpacing(3)

        self.title = ElidedLabel(mode=Qt.TextElideMode.ElideMiddle)
        self.title.setStyleSheet("font-size: 15px; font-weight: 700;")
        self.subtitle = self._wrapping()
        self.note = self._wrapping()  # headlines, or the one note of a trace without a GPU
        self.lacks_label = self._wrapping()  # what the trace lacks, before any card
        self.window_box = QVBoxLayout()  # a window that is not advisable: its one card, first
        self.util_heading = Heading("GPU utilization")
        self.util_grid = QGridLayout()
        self.util_grid.setHorizontalSpacing(8)
        self.util_grid.setVerticalSpacing(1)
        self.cause_heading = Heading("", "click: the longest span")
        self.bars_box = QVBoxLayout()
        self.bars_box.setSpacing(2)
        self.cause_bars: dict[int | None, CauseBar] = {}
        self.cause_table = CauseTable()
        self.cause_table.sig_cause_clicked.connect(self.sig_cause_activated)
        self.ceiling = self._wrapping()
        self.threads_label = self._wrapping()
        self.advice_heading = Heading("Advice", "click a card to see it on the timeline")
        self.top_advice_box = QVBoxLayout()
        self.step_heading = Heading("")
        self.step_plot = StepChart()
        self.step_plot.setMinimumHeight(130 if compact else 150)
        self.step_plot.setMaximumHeight(180 if compact else 200)
        self.step_legend = self._wrapping()
        self.more_advice_box = QVBoxLayout()
        self.more_advice_box.setSpacing(6)
        self.withheld_fold = WithheldFold()
        self.memory_heading = Heading("Memory")
        self.memory_label = self._wrapping()
        self.advice_cards: list[AdviceCard] = []

        for item in (self.title, self.subtitle, self.note, self.lacks_label, self.window_box,
                     self.util_heading, self.util_grid,
                     self.cause_heading, self.bars_box, self.cause_table, self.ceiling,
                     self.threads_label, self.advice_heading, self.top_advice_box,
                     self.step_heading, self.step_plot, self.step_legend, self.more_advice_box,
                     self.withheld_fold, self.memory_heading, self.memory_label):
            if isinstance(item, QWidget):
                self.box.addWidget(item)
            else:
                self.box.addLayout(item)
        self.box.addStretch(1)
        self._title_override: str | None = None
        self._style()
        follow_theme(self.apply_theme)

    def _wrapping(self) -> QLabel:
        label = shrinkable(QLabel())
        label.setWordWrap(True)
        return label

    def _style(self) -> None:
        self.colors = c = plot_theme()
        for label in (self.subtitle, self.ceiling, self.threads_label, self.lacks_label):
            label.setStyleSheet(f"color: {c['dim']};")
        self.note.setStyleSheet(f"color: {warning_colors()['fg']}; font-weight: 600;")
        self.step_plot.style(c)

    def apply_theme(self, _name: str = "") -> None:
        self._style()
        if self.report is not None:
            self.set_report(self.report, self._title_override)

    @property
    def cause_bar(self) -> CauseBar | None:
        """The bar of the busiest device (the one the table details)."""
        dev = primary_device(self.report) if self.report is not None else None
        return self.cause_bars.get(dev) if dev is not None else None

    # ------------------------------------------------------------------ filling

    def set_report(self, report: Report, title: str | None = None) -> None:
        self.report = report
        self._title_override = title
        trace = report.trace
        self.title.setText(title or trace.path.name)
        self.title.setToolTip(str(trace.path))
        rank = f" · rank {trace.rank}" if trace.rank is not None else ""
        self.subtitle.setText(f"window {window_text(report)}{rank}")
        gpu = bool(report.devices)
        heads = [h.title for h in report.headlines]
        self.note.setStyleSheet(f"color: {error_text() if heads else warning_colors()['fg']};"
                                " font-weight: 600;")
        self.note.setText(" · ".join(heads) if gpu else " · ".join([*heads, CPU_NOTE]))
        tips = [f"{h.title}: {h.evidence} {h.fix}".strip() for h in report.headlines]
        set_rich_tooltip(self.note, "<p>{}</p>" * len(tips), *tips)
        self.note.setVisible(bool(heads) or not gpu)
        shown = [lack.text for lack in report.lacks if not lack.withholds]
        self.lacks_label.setText("\n".join(shown))
        self.lacks_label.setVisible(bool(shown))
        self._fill_utilization(report)
        self._fill_causes(report)
        self._fill_threads(report)
        self._fill_advice(report)
        self._fill_steps(report)
        self._fill_memory(report)

    def _fill_utilization(self, report: Report) -> None:
        while self.util_grid.count():
            item = self.util_grid.takeAt(0)
            w = item.widget() if item is not None else None
            if w is not None:
                w.deleteLater()
        self.util_bars: dict[int, QProgressBar] = {}
        c = self.colors
        for row, dev in enumerate(sorted(report.devices)):
            stats = report.devices[dev]
            bar = QProgressBar()
            bar.setRange(0, 1000)
            bar.setValue(round(1000 * stats.utilization))
            bar.setTextVisible(False)
            bar.setFixedHeight(12)
            bar.setMinimumWidth(30)
            bar.setStyleSheet(f"QProgressBar {{ border: 1px solid {c['track_border']}; "
                              f"border-radius: 3px; background: {c['track']}; }} "
                              f"QProgressBar::chunk {{ background: {BUSY_COLOR}; }}")
            self.util_grid.addWidget(QLabel(report.trace.device_label(dev)), 2 * row, 0)
            self.util_grid.addWidget(bar, 2 * row, 1)
            self.util_grid.addWidget(rich_label("<b>{}</b>", units.pct(stats.utilization)),
                                     2 * row, 2)
            text = ElidedLabel(f"busy {units.duration(stats.busy_us)}, idle "
                               f"{units.duration(stats.idle_us)} in "
                               f"{units.plural(stats.idle_gaps, 'gap')}")
            text.setStyleSheet(f"color: {c['dim']};")
            self.util_grid.addWidget(text, 2 * row + 1, 1, 1, 2)
            self.util_bars[dev] = bar
        self.util_grid.setColumnStretch(1, 1)
        self.util_heading.set_heading(f"{report.trace.device_kind} utilization")
        self.util_heading.setVisible(bool(report.devices))

    def _fill_causes(self, report: Report) -> None:
        for bar in self.cause_bars.values():
            self.bars_box.removeWidget(bar)
            bar.deleteLater()
        while self.bars_box.count():
            item = self.bars_box.takeAt(0)
            w = item.widget() if item is not None else None
            if w is not None:
                w.deleteLater()
        self.cause_bars = {}
        dev = primary_device(report)
        if dev is None:  # the main thread's step time (or the window) by cause
            values = {c: us for c, us in report.host_by_cause.items()
                      if c not in report.unknown_causes}
            self.cause_heading.set_heading("Step time of the main thread, by what it was in"
                                           if report.steps else
                                           "Time of the main thread, by what it was in")
            bar = CauseBar()
            bar.set_values(values)
            bar.sig_cause_clicked.connect(self.sig_cause_activated)
            self.bars_box.addWidget(bar)
            self.cause_bars[None] = bar
            self.cause_table.set_values(report.host_by_cause, self.colors["dim"], "step time",
                                        never=NOT_CPU_STATES[:1],
                                        unknown=tuple(report.unknown_causes))
            self._show_ceiling(report, None)
            return
        several = len(report.devices) > 1
        kind = report.trace.device_kind
        self.cause_heading.set_heading(f"{kind} idle time by cause")
        for d in sorted(report.devices):
            bar = CauseBar()
            bar.set_values({c: us for c, us in report.devices[d].idle_by_cause.items()
                            if c not in report.unknown_causes})
            bar.sig_cause_clicked.connect(self.sig_cause_activated)
            bar.setToolTip(f"{report.trace.device_label(d)}: idle time by cause")
            if several:
                tag = QLabel(report.trace.device_label(d) + (" (below)" if d == dev else ""))
                tag.setStyleSheet(f"color: {self.colors['dim']};")
                self.bars_box.addWidget(tag)
            self.bars_box.addWidget(bar)
            self.cause_bars[d] = bar
        stats = report.devices[dev]
        tips = {}
        by_annotation = stats.python_by_annotation
        if by_annotation:
            top = sorted(by_annotation.items(), key=lambda kv: -kv[1])[:3]
            tips["python"] = "Python between ops, mostly in " + ", ".join(
                f"{name or 'no annotation'} ({units.duration(us)})" for name, us in top)
        self.cause_table.set_values(stats.idle_by_cause, self.colors["dim"], "idle", tips,
                                    unknown=tuple(report.unknown_causes))
        self._show_ceiling(report, dev)

    def _show_ceiling(self, report: Report, dev: int | None) -> None:
        """The largest ceiling of the device (None: the main thread's step time, no GPU)."""
        self.ceiling.setText(ceiling_text(report, dev))
        self.ceiling.setVisible(bool(self.ceiling.text()))

    def _fill_threads(self, report: Report) -> None:
        """Without a GPU: the other threads busy during the steps (what took the step's time)."""
        if report.devices:
            self.threads_label.setVisible(False)
            return
        lines = []
        base = max(report.host_base_us or report.window_us, 1.0)
        for lane in lane_model.thread_lanes(report, report.window[0])[:4]:
            busy = lane.extra["busy_us"]
            assert lane.texts is not None  # thread_lanes always sets the names
            starts, ends, names = lane.texts
            top = max(range(len(names)), key=lambda i: ends[i] - starts[i])
            lines.append(rich(f'<span style="color:{OTHER_THREAD_COLOR}">&#9632;</span> '
                              "{}: busy {} ({} of the step time), longest {} {}", lane.label,
                              units.duration(busy), units.pct(busy / base), names[top],
                              units.duration((ends[top] - starts[top]) * 1000)))
        set_rich(self.threads_label, "<b>Other threads during the steps</b><br>"
                 + "<br>".join(lines) if lines else "")
        self.threads_label.setVisible(bool(lines))

    def _fill_steps(self, report: Report) -> None:
        gpu = bool(report.devices)
        kind = report.trace.device_kind
        self.step_heading.set_heading(f"Per step: where the {kind}'s time went" if gpu
                                      else "Per step: where the main thread's time went")
        parts = communication_apart(report, step_breakdown(report))
        self.step_plot.set_parts(parts, [s.name for s in report.steps])
        set_rich(self.step_legend, parts_legend(parts, {"compute": f"{kind} busy",
                                                        "communication": "communication"}))
        for w in (self.step_heading, self.step_plot, self.step_legend):
            w.setVisible(bool(report.steps))
        self.step_parts = parts

    def _fill_memory(self, report: Report) -> None:
        lines = [rich("<b>{}</b>: {}", report.trace.device_label(dev), facts_text(facts, "; "))
                 for dev, facts in memory_facts(report).items()]
        set_rich(self.memory_label, "<br>".join(lines) if lines else no_memory_text(report))

    def _fill_advice(self, report: Report) -> None:
        for card in self.advice_cards:
            card.setParent(None)
            card.deleteLater()
        self.advice_cards = []
        for i, advice in enumerate(report.advice):
            accent = CAUSE_COLORS.get(advice.cause or "", CAUSE_COLORS["data_loading"])
            acts = self.show_actions
            card = AdviceCard(advice.title, advice.evidence, advice.fix, self.colors,
                              accent=accent, minor=advice.minor,
                              culprits=[c.text for c in advice.culprits],
                              actions=card_actions(advice) if acts else (),
                              links=CARD_LINKS.get(advice.id) if acts else None)
            card.sig_clicked.connect(lambda i=i: self.sig_advice_activated.emit(i))
            card.sig_action.connect(lambda key, i=i: self.sig_advice_action.emit(key, i))
            first = self.window_box if not report.advisable else self.top_advice_box
            (first if i == 0 else self.more_advice_box).addWidget(card)
            self.advice_cards.append(card)
        if not report.advice:
            card = AdviceCard("Nothing stands out", "No advice rule fired on this trace.", "",
                              self.colors, clickable=False)
            self.top_advice_box.addWidget(card)
            self.advice_cards.append(card)
        self.advice_heading.setVisible(report.advisable or len(report.advice) > 1)
        self.withheld_fold.set_cards(report.withheld, self.colors,
                                     withheld_reason(report) or "a cause the trace cannot know")

    @property
    def advice_count(self) -> int:
        return len(self.report.advice) if self.report is not None else 0


def communication_apart(report: Report, parts: dict) -> dict:
    """The per-step bars as the timeline paints the lane (lanes.device_lane): the time the
    primary GPU runs communication with nothing else leaves its busy ("compute") part for a
    "communication" part of its own, right above it. A trace without such time keeps its
    parts as step_breakdown gives them."""
    dev = primary_device(report)
    stats = report.devices.get(dev) if dev is not None else None
    if stats is None or not report.steps or not len(stats.exposed_comm):
        return parts
    lo = np.array([s.start_us for s in report.steps])
    hi = lo + np.array([s.dur_us for s in report.steps])
    alone = np.minimum(covered_in(np.asarray(stats.exposed_comm, np.float64).reshape(-1, 2),
                                  lo, hi), parts["compute"])
    if not alone.any():
        return parts
    out = {"compute": parts["compute"] - alone, "communication": alone}
    out.update((k, v) for k, v in parts.items() if k != "compute")
    return out


def main(argv: list[str] | None = None) -> int:
    from stallscope.gui.standalone import show_view

    def build(reports):
        panel = SummaryPanel()
        panel.set_report(reports[0])
        return panel

    return show_view(build, "Show the summary panel of one trace.", size=(460, 900), argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
