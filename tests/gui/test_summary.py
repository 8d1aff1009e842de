"""The summary panel on its own: every device of a multi-GPU trace, and what a narrow panel does
(it wraps and elides, it never grows wider than it is)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import gzip
import json

import pytest
from fixture_traces import fixture_path

from stallscope.core import units
from stallscope.core.analysis import analyze
from stallscope.core.causes import CAUSES
from stallscope.core.trace import load
from stallscope.gui.views.summary import SummaryPanel
from stallscope.gui.widgets import breakable


def _two_gpu_trace(path, idle_on_1: int):
    """GPU 0 busy 800 of 1000 µs, GPU 1 busy 1000 - idle_on_1."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
               "tid": 1, "ts": 0, "dur": 1000},
              # an operator: without any, Python time is unknown and not drawn (issue 33)
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0,
               "dur": 10}]
    for dev, busy in ((0, 800), (1, 1000 - idle_on_1)):
        events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": dev, "tid": 7,
                       "ts": 0, "dur": busy, "args": {"device": dev, "stream": 7}})
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)


def test_every_device_gets_its_bar_and_utilization(qtbot, tmp_path):
    p = tmp_path / "two.pt.trace.json.gz"
    _two_gpu_trace(p, idle_on_1=600)
    report = analyze(load(p))
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 800)
    panel.set_report(report)
    panel.show()
    assert set(panel.cause_bars) == {0, 1} == set(panel.util_bars)
    assert panel.util_bars[0].value() == 800 and panel.util_bars[1].value() == 400
    for dev, bar in panel.cause_bars.items():
        assert sum(bar.values.values()) == pytest.approx(report.devices[dev].idle_us)
    # the table details the busiest device
    assert panel.cause_bar is panel.cause_bars[0]


def test_cause_rows_hold_the_report_numbers_with_units(qtbot):
    report = analyze(load(fixture_path("kineto_nw0")))
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.resize(300, 700)  # narrow: rows keep their numbers, names elide
    panel.set_report(report)
    panel.show()
    qtbot.waitExposed(panel)
    by_cause = report.devices[0].idle_by_cause
    idle = sum(by_cause.values())
    shown = [row.cause for row in panel.cause_table.rows]
    assert shown == [c for c in CAUSES if by_cause[c] > 0]
    for row in panel.cause_table.rows:
        assert row.time.text() == units.duration(by_cause[row.cause])
        assert row.share.text() == units.pct(by_cause[row.cause] / idle)
    assert panel.widget().width() <= panel.viewport().width()


@pytest.mark.parametrize("name", ["kineto_nw0", "hta_df_index_resolver", "hta_sampled_rank-0"])
def test_memory_line_says_only_what_was_recorded(qtbot, name):
    report = analyze(load(fixture_path(name)))
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.set_report(report)
    text = panel.memory_label.text()
    assert " -" not in text and " 0×" not in text and "shrank 0" not in text
    for m in report.memory.values():
        if m.peak_allocated is not None and len(m.ts):
            assert f"peak allocated {units.mib(m.peak_allocated)}" in text
        if m.peak_reserved is not None:
            assert f"peak reserved {units.mib(m.peak_reserved)}" in text
        else:
            assert "peak reserved" not in text
    if not any(len(m.ts) or m.cuda_malloc_count for m in report.memory.values()):
        assert text.startswith("No CUDA memory events recorded")


def test_ceiling_line_names_the_largest_ceiling(qtbot):
    """GPU: the device's largest ceiling with its factor; without a GPU a cause that is the whole
    step is said as such (no '1000000.00x'); the analysis view's panel only gets card buttons."""
    panel = SummaryPanel(actions=True)
    qtbot.addWidget(panel)
    report = analyze(load(fixture_path("kineto_nw0")))
    panel.set_report(report)
    best = max((c for c in report.ceilings if c.device == 0), key=lambda c: c.speedup)
    assert best.cause == "data_loading" and 1.4 < best.speedup < 1.7
    assert panel.ceiling.text() == f"Ceiling: up to {best.speedup:.2f}x faster if the GPU " \
                                   "never waited for data"
    card = panel.advice_cards[0]
    assert report.advice[0].id == "dataloader_bound" and set(card.buttons) == {"try_it", "lmdb"}
    clicked = []
    panel.sig_advice_action.connect(lambda action, i: clicked.append((action, i)))
    card.buttons["try_it"].click()
    card.fix.linkActivated.emit("lmdb")
    assert clicked == [("try_it", 0), ("lmdb", 0)]
    cpu = analyze(load(fixture_path("hta_cpu_only")))
    panel.set_report(cpu)
    # one step of 3 events (issue 33): too short to judge, no ceiling quoted; gloo's
    # collectives card is withheld, folded
    assert panel.ceiling.text() == "Ceilings withheld for a trace too short to judge."
    assert not panel.ceiling.isHidden()
    assert [a.id for a in cpu.advice] == ["too_short"]
    assert [a.id for a in cpu.withheld][:1] == ["collective_wait"]
    assert all(not c.buttons for c in panel.advice_cards)  # no DataLoader card: no actions


def test_cards_list_their_culprits_as_plain_text(qtbot):
    """The card names the events behind its idle time (issue 22), as plain text; the start-up
    window's message leads the note."""
    from PySide6.QtCore import Qt

    panel = SummaryPanel(actions=True)
    qtbot.addWidget(panel)
    report = analyze(load(fixture_path("kineto_nw0")))
    panel.set_report(report)
    card = panel.advice_cards[0]
    assert card.culprits.textFormat() == Qt.TextFormat.PlainText
    assert card.culprits.text().replace("\u200b", "").startswith(  # breakable(): no clipping
        "•\u00a0enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ ×6, 352.40 ms")
    pageable = panel.advice_cards[[a.id for a in report.advice].index("pageable_h2d")]
    assert set(pageable.buttons) == {"try_it"} and "aten::to" in pageable.culprits.text()
    amd = analyze(load(fixture_path("hta_amd_trace")))
    panel.set_report(amd)
    # issue 33: the window's one card comes first, above the utilization; no headline
    assert panel.window_box.count() == 1 and panel.note.isHidden()
    assert panel.advice_cards[0].title.text() == "<b>This window is start-up, not steady " \
        "training</b>"
    assert panel.ceiling.text() == "Ceilings withheld for a start-up window."


def test_the_hot_line_card_offers_the_wizard_only_for_decoding(qtbot):
    from stallscope.core.advice import advise
    from stallscope.core.lineprof import Line, Profile

    panel = SummaryPanel(actions=True)
    qtbot.addWidget(panel)
    report = analyze(load(fixture_path("kineto_nw0")))
    for source, buttons in (("img = Image.open(p).convert('RGB')", {"lmdb"}),
                            ("img = img.float() / 255", set())):
        prof = Profile(function="__getitem__", qualname="Ds.__getitem__", file="ds.py",
                       first_line=1, samples=10, lines=[Line(2, 10, 1.0, source)])
        report.advice = advise(report, [prof])
        panel.set_report(report)
        k = [a.id for a in report.advice].index("dataset_line")
        assert set(panel.advice_cards[k].buttons) == buttons


def test_a_long_fix_folds_so_the_step_chart_shows(qtbot):
    """kineto_nw0's DataLoader fix is a paragraph: the card shows its first words, the first
    sentence of its evidence and 'more' (the per-step chart stays on the first screen at
    1400x900); 'more' unfolds the whole fix and evidence,
    'less' folds it again, the LMDB link still acts; a short fix is shown whole."""
    from stallscope.gui.views.analysis import AnalysisView

    report = analyze(load(fixture_path("kineto_nw0")))
    view = AnalysisView()
    qtbot.addWidget(view)
    view.resize(1400, 860)  # the analysis view inside a 1400x900 window
    view.summary.set_report(report)
    view.show()
    qtbot.waitExposed(view)
    panel = view.summary
    card = panel.advice_cards[0]
    fix = report.advice[0].fix
    assert len(fix) > 400 and card.fix_folded
    # folded: the first words, 'more', and the link its hidden part holds
    assert card.fix.text().endswith('<a href="#more">more</a> · <a href="lmdb">LMDB wizard</a>')
    assert len(card.fix.text()) < 330
    # the chart's top is inside the panel's viewport
    top = panel.step_plot.mapTo(panel.viewport(), panel.step_plot.rect().topLeft()).y()
    assert 0 < top < panel.viewport().height() - 100
    evidence = report.advice[0].evidence
    assert card.evidence.text() == evidence[:evidence.index("56.0%).") + 7]  # 1st sentence
    card.fix.linkActivated.emit("#more")
    assert not card.fix_folded and "LMDB wizard</a>" in card.fix.text()
    assert card.evidence.text() == evidence
    assert card.fix.text().endswith('<a href="#more">less</a>')
    clicked = []
    card.sig_action.connect(clicked.append)
    card.fix.linkActivated.emit("lmdb")
    card.fix.linkActivated.emit("#more")
    assert clicked == ["lmdb"] and card.fix_folded
    pageable = panel.advice_cards[[a.id for a in report.advice].index("pageable_h2d")]
    assert not pageable.fix_folded and "more</a>" not in pageable.fix.text()
    # a short fix and evidence: the card shows its culprits whole, no toggle
    host = panel.advice_cards[[a.id for a in report.advice].index("host_bound")]
    assert not host.fix_folded and host.culprits.text().count("\n") == 2
    # folded, a card lists its largest culprit and how many more there are (hta_amd's backward,
    # withheld for its start-up window since issue 33: the fold's first card)
    amd = analyze(load(fixture_path("hta_amd_trace")))
    panel.set_report(amd)
    card = panel.withheld_fold.cards[0]
    names = [c.text for c in amd.withheld[0].culprits]
    assert amd.withheld[0].id == "backward_bound" and len(names) == 3 and card.fix_folded
    assert card.culprits.text() == f"•\u00a0{breakable(names[0])}\n+ 2 more"
    card.fix.linkActivated.emit("#more")
    assert card.culprits.text() == "\n".join(f"•\u00a0{breakable(n)}" for n in names)


def test_an_mtia_trace_names_its_accelerator(qtbot):
    """No 'GPU' for an MTIA trace: its utilization heading, rows and cause heading say MTIA."""
    report = analyze(load(fixture_path("hta_mtia_inference_rank_0")))
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.set_report(report)
    assert panel.util_heading.text() == "MTIA utilization"
    assert panel.cause_heading.text().startswith("MTIA idle time by cause")
    labels = [panel.util_grid.itemAt(i).widget().text() for i in range(panel.util_grid.count())]
    assert "MTIA 17" in labels and not any(t.startswith("GPU") for t in labels)
    assert panel.subtitle.text().startswith("window 459.67 ms · no ProfilerStep")


def test_the_subtitle_says_steps_in_one_voice(qtbot):
    report = analyze(load(fixture_path("kineto_nw0")))
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.set_report(report)
    mean = sum(s.dur_us for s in report.steps) / len(report.steps)
    assert panel.subtitle.text() == (f"window {units.duration(report.window_us)} · mean of the "
                                     f"6 profiled steps: {units.duration(mean)}")
    one = analyze(load(fixture_path("hta_cpu_only")))
    assert len(one.steps) == 1
    panel.set_report(one)
    assert f"· 1 profiled step of {units.duration(one.steps[0].dur_us)}" in panel.subtitle.text()


def test_the_per_step_charts_top_tick_label_is_whole(qtbot):
    """hta_rank-0's tallest step bar tops out just above 100 ms: the "100" tick sits on the
    plot's top edge, and its label, centred on the tick, had its upper half cut off."""
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QFontMetrics

    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.set_report(analyze(load(fixture_path("hta_rank-0"))))
    panel.resize(300, 1400)
    panel.show()
    qtbot.waitExposed(panel)
    chart = panel.step_plot
    view = chart.getPlotItem().getViewBox()
    lo, hi = view.viewRange()[1]
    axis = chart.getAxis("left")
    top = max(v for _spacing, values in axis.tickValues(lo, hi, view.height())
              for v in values if v <= hi)
    assert hi - top < 0.01 * (hi - lo)  # the case: a labelled tick at the very top
    y = chart.mapFromScene(view.mapViewToScene(QPointF(0, top))).y()
    half = QFontMetrics(axis.style["tickFont"] or chart.font()).height() / 2
    assert y - half >= 0, (top, y, half)
