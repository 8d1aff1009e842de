"""The line heatmap view: colours by share, top lines that scroll to their line, before/after,
warnings, and opening .json / .lprof files (the pickle only after confirmation)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import sys
import textwrap
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QMessageBox

from stallscope.core import lineprof, units
from stallscope.gui.colors import BETTER_COLOR, HEAT_STOPS, WORSE_COLOR
from stallscope.gui.controllers.line_stats import LineStatsController
from stallscope.gui.views.heatmap import HeatmapView
from stallscope.gui.views.heatmap_files import ask_trust, open_profiles
from stallscope.gui.views.heatmap_table import heat_color

FILLER = 150  # lines before the slow one, so selecting it must scroll

SOURCE = "class Ds:\n    def __getitem__(self, i):\n" + "".join(
    f"        v{k} = i + {k}\n" for k in range(FILLER)) + textwrap.indent(textwrap.dedent('''\
    img = decode(i)
    arr = to_array(img)
    return arr
'''), "        ")


def make_profile(folder: Path, times: dict[str, float], samples=20) -> lineprof.Profile:
    """A profile of SOURCE (written to folder/ds.py): `times` maps a line's text to seconds;
    every other body line costs 1 µs."""
    file = folder / "ds.py"
    file.write_text(SOURCE)
    lines = []
    for n, text in enumerate(SOURCE.splitlines(), 1):
        if n < 2:
            continue
        body = n > 2
        t = times.get(text.strip(), 1e-6) if body else 0.0
        lines.append(lineprof.Line(n, samples if body else 0, t, text))
    return lineprof.Profile("__getitem__", "Ds.__getitem__", str(file), 2, lines,
                            samples=samples, workers=2)


def luminance(c: QColor) -> float:
    return 0.299 * c.red() + 0.587 * c.green() + 0.114 * c.blue()


def row_of(view: HeatmapView, text: str) -> int:
    return next(i for i, ln in enumerate(view.profile.lines) if ln.source.strip() == text)


def cell(view: HeatmapView, row: int, column: str, role=Qt.ItemDataRole.DisplayRole):
    col = view.model.headers().index(column)
    return view.model.data(view.model.index(row, col), role)


def test_lines_are_painted_by_their_share(qtbot, tmp_path):
    view = HeatmapView()
    qtbot.addWidget(view)
    view.set_profile(make_profile(tmp_path, {"img = decode(i)": 0.6, "arr = to_array(img)": 0.2}))
    view.resize(1100, 600)
    view.show()
    heavy, mid = row_of(view, "img = decode(i)"), row_of(view, "arr = to_array(img)")
    cheap = row_of(view, "v3 = i + 3")
    bg = [cell(view, r, "Source", Qt.ItemDataRole.BackgroundRole).color()
          for r in (heavy, mid, cheap)]
    assert bg[0] == heat_color(1.0) == QColor(HEAT_STOPS[-1][1])  # the darkest colour
    assert luminance(bg[0]) < luminance(bg[1]) < luminance(bg[2])
    assert cell(view, 0, "Source", Qt.ItemDataRole.BackgroundRole) is None  # the def line
    total = 0.6 + 0.2 + 1e-6 * (FILLER + 1)
    assert cell(view, heavy, "%") == units.pct(0.6 / total) == "75.0%"
    assert cell(view, heavy, "Hits") == "20"
    assert cell(view, heavy, "Per hit") == "30.00 ms"
    assert cell(view, heavy, "Time") == "600.00 ms"
    assert cell(view, heavy, "Source").strip() == "img = decode(i)"
    # Text stays readable on the dark end of the scale.
    fg = cell(view, heavy, "Source", Qt.ItemDataRole.ForegroundRole).color()
    assert fg == QColor("#ffffff")
    assert "Ds.__getitem__" in view.title.text()
    assert "20 samples" in view.subtitle.text() and "merged over 2 workers" in view.subtitle.text()
    assert not view.warnings.isVisible()


def test_legend_draws_the_scale(qtbot, tmp_path):
    view = HeatmapView()
    qtbot.addWidget(view)
    view.set_profile(make_profile(tmp_path, {"img = decode(i)": 0.6}))
    view.resize(1100, 600)
    view.show()
    image = view.legend.grab().toImage()
    y = view.legend.fontMetrics().height() + 2 + 6
    left, right = image.pixelColor(10, y), image.pixelColor(image.width() - 10, y)
    assert luminance(left) > 230 and abs(left.blue() - QColor(HEAT_STOPS[0][1]).blue()) < 30
    assert abs(right.red() - 0xc9) < 25 and right.green() < 80
    assert view.legend.max_share == pytest.approx(view.model.scale_max)


def test_top_lines_are_listed_and_selecting_one_scrolls_to_it(qtbot, tmp_path):
    view = HeatmapView()
    qtbot.addWidget(view)
    view.set_profile(make_profile(tmp_path, {"img = decode(i)": 0.6, "arr = to_array(img)": 0.2,
                                             "v10 = i + 10": 0.05}))
    view.resize(1100, 500)
    view.show()
    qtbot.waitExposed(view)
    items = [view.top_list.item(i) for i in range(view.top_list.count())]
    assert [it.data(Qt.ItemDataRole.UserRole) for it in items[:3]] == [FILLER + 3, FILLER + 4, 13]
    assert items[0].text().splitlines()[1] == "img = decode(i)"
    heavy = row_of(view, "img = decode(i)")
    rect = view.table.visualRect(view.model.index(heavy, 0))
    assert not view.table.viewport().rect().intersects(rect)  # off screen at first
    with qtbot.waitSignal(view.sig_line_selected) as sig:
        view.top_list.setCurrentItem(items[0])
    assert sig.args == [FILLER + 3]
    assert view.table.currentIndex().row() == heavy
    rect = view.table.visualRect(view.model.index(heavy, 0))
    assert view.table.viewport().rect().contains(rect)
    view.top_list.setCurrentItem(items[2])
    assert view.table.currentIndex().row() == row_of(view, "v10 = i + 10")


def test_before_after_columns(qtbot, tmp_path):
    before = make_profile(tmp_path, {"img = decode(i)": 0.6, "arr = to_array(img)": 0.2})
    after_dir = tmp_path / "after"
    after_dir.mkdir()
    after = make_profile(after_dir, {"img = decode(i)": 0.1, "arr = to_array(img)": 0.3},
                         samples=40)
    view = HeatmapView()
    qtbot.addWidget(view)
    view.set_profile(after, compare=before)
    assert view.model.headers()[5:7] == ("Before per sample", "Δ per sample")
    heavy = row_of(view, "img = decode(i)")
    # per sample: before 600 ms / 20 = 30 ms, after 100 ms / 40 = 2.5 ms
    assert cell(view, heavy, "Before per sample") == "30.00 ms"
    assert cell(view, heavy, "Δ per sample") == "-27.50 ms"
    assert cell(view, heavy, "Δ per sample", Qt.ItemDataRole.ForegroundRole).color() == \
        QColor(BETTER_COLOR)
    arr = row_of(view, "arr = to_array(img)")  # 10 ms -> 7.5 ms per sample
    assert cell(view, arr, "Δ per sample") == "-2.50 ms"
    cheap = row_of(view, "v3 = i + 3")  # 1 µs / 20 vs 1 µs / 40: a change below 0.5 µs
    assert cell(view, cheap, "Δ per sample") == "0.0 µs"
    assert cell(view, cheap, "Δ per sample", Qt.ItemDataRole.ForegroundRole).color() != \
        QColor(WORSE_COLOR)
    worse = make_profile(after_dir, {"img = decode(i)": 2.0}, samples=20)
    view.set_profile(worse, compare=before)
    assert cell(view, heavy, "Δ per sample") == "+70.00 ms"
    assert cell(view, heavy, "Δ per sample", Qt.ItemDataRole.ForegroundRole).color() == \
        QColor(WORSE_COLOR)
    # whole function per sample: before (0.8 s + 151 µs) / 20, after (2.0 s + 152 µs) / 20
    assert "100.01 ms per sample" in view.subtitle.text()
    assert "before: 40.01 ms per sample (+150%)" in view.subtitle.text()


def test_changed_source_is_warned_and_profiled_code_shown(qtbot, tmp_path):
    profile = make_profile(tmp_path, {"img = decode(i)": 0.6})
    Path(profile.file).write_text(SOURCE.replace("img = decode(i)", "img = decode_fast(i)"))
    view = HeatmapView()
    qtbot.addWidget(view)
    # the source is matched where the stats are read (off the GUI thread), not by the view
    view.set_profile(lineprof.with_sources([profile])[0])
    view.show()
    assert view.warnings.isVisible()
    assert "ds.py changed since the run" in view.warnings.text()
    assert cell(view, row_of(view, "img = decode(i)"), "Source").strip() == "img = decode(i)"


def test_helpers_that_were_not_profiled_are_named_with_the_option_that_profiles_them(
        qtbot, tmp_path):
    """Stats whose function calls helpers beyond --lineprof-depth (the capture names them):
    the heatmap says their time is on the calling line and how to see their lines."""
    from shots import save_shot

    profile = make_profile(tmp_path, {"img = decode(i)": 0.6, "arr = to_array(img)": 0.3})
    profile.unprofiled = ["decode", "to_array"]
    view = HeatmapView()
    qtbot.addWidget(view)
    view.set_profile(lineprof.with_sources([profile])[0])
    view.resize(1000, 610)
    view.show()
    qtbot.waitExposed(view)
    assert view.warnings.isVisible()
    assert view.warnings.text() == (
        "ℹ decode(), to_array(), called here, were not line-profiled: their time shows on "
        "the line that calls them; rerun with --lineprof-depth 1 (or deeper) to see their "
        "lines too")
    save_shot(view, "heatmap_unprofiled")


def test_several_functions_get_a_chooser(qtbot, tmp_path):
    main = make_profile(tmp_path, {"img = decode(i)": 0.6})
    helper = lineprof.Profile("decode", "decode", main.file, 1,
                              [lineprof.Line(1, 20, 0.5, "def decode(i): return i")],
                              samples=20, root=False)
    view = HeatmapView()
    qtbot.addWidget(view)
    view.set_profiles([main, helper])
    view.show()
    assert view.function_box.isVisible() and view.function_box.count() == 2
    view.function_box.setCurrentIndex(1)
    assert view.profile is helper and view.model.rowCount() == 1
    view.set_profiles([])
    assert view.empty.isVisible() and view.model.rowCount() == 0


def test_open_json_session_and_lprof_after_confirmation(qtbot, tmp_path, monkeypatch):
    profile = make_profile(tmp_path, {"img = decode(i)": 0.6})
    session = tmp_path / "session"
    lineprof.save(profile, session / "lineprof" / "Ds.__getitem__.json")
    assert ask_trust(session) is False
    assert open_profiles(session)[0].qualname == "Ds.__getitem__"

    from line_profiler import LineStats

    lprof = tmp_path / "run.lprof"
    key = (profile.file, 2, "Ds.__getitem__")
    LineStats({key: [(FILLER + 3, 5, 3_000_000)]}, 1e-9).to_file(lprof)
    asked = []
    assert open_profiles(lprof, confirm=lambda _p, path: asked.append(path) or False) is None
    assert asked == [lprof]
    assert ask_trust(lprof, confirm=lambda _p, _path: True) is True
    renamed = tmp_path / "stats.bin"  # a pickle under another name is still asked about
    renamed.write_bytes(lprof.read_bytes())
    assert ask_trust(renamed, confirm=lambda _p, _path: False) is None
    (p,) = open_profiles(lprof, confirm=lambda _p, _path: True)
    assert p.line(FILLER + 3).hits == 5 and p.line(FILLER + 3).total_s == pytest.approx(0.003)
    assert p.line(FILLER + 3).source.strip() == "img = decode(i)"

    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *a: shown.append(a[2]))
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    assert open_profiles(bad) is None
    assert len(shown) == 1 and str(bad) in shown[0] and "not JSON" in shown[0]


@pytest.mark.runner  # line stats of a script in a child process
def test_missing_line_profiler_banner_offers_the_install(qtbot, tmp_path):
    view = HeatmapView()
    qtbot.addWidget(view)
    controller = LineStatsController()
    view.sig_install_requested.connect(controller.install_line_profiler)
    controller.sig_install_finished.connect(view.show_install_result)
    banner = view.show_missing_line_profiler(sys.executable)
    assert view.show_missing_line_profiler(sys.executable) is banner  # one banner
    assert f"{sys.executable} -m pip install line_profiler" in banner.label.text()
    # In this interpreter line_profiler is already there: pip succeeds without the network.
    with qtbot.waitSignal(controller.sig_install_finished, timeout=60_000) as sig:
        banner.button.click()
        assert banner.button.text() == "Installing…" and not banner.button.isEnabled()
    assert sig.args[0] is True and "line_profiler" in sig.args[1]
    assert "is installed" in banner.label.text() and not banner.button.isEnabled()
    assert banner.button.text() == "Installed"

    # An interpreter that cannot run pip: the banner says so and offers a retry.
    broken = tmp_path / "python-broken"
    broken.write_text("#!/bin/sh\necho 'No module named pip' >&2\nexit 1\n")
    broken.chmod(0o755)
    view2 = HeatmapView()
    qtbot.addWidget(view2)
    view2.sig_install_requested.connect(controller.install_line_profiler)
    controller.sig_install_finished.connect(view2.show_install_result)
    banner2 = view2.show_missing_line_profiler(str(broken))
    with qtbot.waitSignal(controller.sig_install_finished, timeout=60_000) as sig:
        banner2.button.click()
    assert sig.args == [False, "No module named pip"]
    assert "Install failed (No module named pip)" in banner2.label.text()
    assert banner2.button.text() == "Retry" and banner2.button.isEnabled()


def test_warning_strips_follow_the_theme(qtbot):
    from PySide6.QtWidgets import QApplication

    from stallscope.gui import theme
    from stallscope.gui.colors import WARNING_COLORS

    app = QApplication.instance()
    try:
        theme.apply_theme(app, "light")
        view = HeatmapView()
        qtbot.addWidget(view)
        view.show_missing_line_profiler("/usr/bin/python3")
        assert WARNING_COLORS[False]["bg"] in view.warnings.styleSheet()
        theme.apply_theme(app, "dark")  # restyles the open view
        assert WARNING_COLORS[True]["bg"] in view.warnings.styleSheet()
        assert WARNING_COLORS[True]["bg"] in view.missing.styleSheet()
    finally:
        theme.apply_theme(app, "system")


def test_an_opened_session_fills_the_tab_from_the_documents_line_stats(
        qtbot, window, open_and_wait, tmp_path, real_trace, monkeypatch):
    """The document job read the session's line stats for its advice; the heatmap shows those
    (no second read), and a document without line stats drops the tab again."""
    import shutil

    session = tmp_path / "run-7"
    (session / "traces").mkdir(parents=True)
    (session / "run.json").write_text('{"script": "train.py"}')
    shutil.copy(real_trace("kineto_nw0"), session / "traces" / "host.pt.trace.json.gz")
    profile = make_profile(tmp_path, {"img = decode(i)": 0.05, "arr = to_array(img)": 0.01})
    lineprof.save(profile, session / "lineprof" / "Ds.__getitem__.json")
    reads = []
    real = lineprof.read_stats
    monkeypatch.setattr(lineprof, "read_stats", lambda *a, **k: reads.append(a) or real(*a, **k))

    doc = open_and_wait(session)
    view = window.heatmap
    assert view is not None and view.profiles == doc.line_stats.profiles  # at once, no job
    assert reads == [] and not window.heatmaps.stats.busy
    assert window.tabs.tabText(window.tabs.indexOf(view)) == "Line heatmap: run-7"
    assert view.profile.total_s == pytest.approx(lineprof.load_session(session)[0].total_s)
    assert window.tabs.currentWidget() is window.analysis  # the trace stays in front

    open_and_wait(real_trace("kineto_nw0"))
    assert window.heatmap is None


def test_heaviest_lines_wrap_inside_the_list_at_1024x700(qtbot, tmp_path):
    """A source line without spaces (a long chain of calls) wraps inside the Heaviest lines
    list at the heatmap tab's size in a 1024x700 window: no line of any item is wider than the
    list, and the list's heading is whole."""
    from PySide6.QtGui import QTextDocument, QTextOption
    from PySide6.QtWidgets import QApplication

    long_line = "x=torch.from_numpy(np.asarray(Image.open(self.files[i]).convert('RGB')))"
    file = tmp_path / "ds.py"
    file.write_text(f"def __getitem__(self, i):\n    {long_line}\n    return x\n")
    prof = lineprof.Profile("__getitem__", "Ds.__getitem__", str(file), 1, [
        lineprof.Line(1, 0, 0.0, "def __getitem__(self, i):"),
        lineprof.Line(2, 20, 0.9, f"    {long_line}"),
        lineprof.Line(3, 20, 0.1, "    return x")], samples=20, workers=0)
    view = HeatmapView()
    qtbot.addWidget(view)
    view.set_profile(prof)
    view.resize(1000, 610)  # the tab's area in a 1024x700 window
    view.show()
    qtbot.waitExposed(view)
    QApplication.processEvents()
    listing = view.top_list
    room = listing.viewport().width() - 2 * listing.spacing() - 8  # the item's text margins
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WordWrap)  # as an item view wraps: between words
    for i in range(listing.count()):
        doc = QTextDocument()
        doc.setDefaultFont(listing.font())
        doc.setDefaultTextOption(option)
        doc.setPlainText(listing.item(i).text())
        doc.setTextWidth(room)
        assert doc.idealWidth() <= room, listing.item(i).text()
    assert listing.item(0).text().replace("\u200b", "").splitlines()[1] == long_line
    assert listing.horizontalScrollBar().maximum() == 0
    label = view.top_label
    assert label.fontMetrics().horizontalAdvance(label.text()) <= label.width()


@pytest.mark.runner  # the standalone view in a child process
def test_the_standalone_view_saves_a_screenshot_or_says_why_in_one_line(tmp_path):
    """`python -m stallscope.gui.views.heatmap SESSION --screenshot OUT.png`, as every view
    runs standalone: a PNG of the session's stats, or one line when there are none (no
    message box left waiting for a click)."""
    import subprocess

    from PySide6.QtGui import QImage

    session = tmp_path / "session"
    lineprof.save(make_profile(tmp_path, {"img = decode(i)": 0.6}),
                  session / "lineprof" / "Ds.__getitem__.json")
    out = tmp_path / "heat.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    cmd = [sys.executable, "-m", "stallscope.gui.views.heatmap"]
    done = subprocess.run([*cmd, str(session), "--screenshot", str(out)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1200, 640)
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run([*cmd, str(empty), "--screenshot", str(tmp_path / "no.png")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not (tmp_path / "no.png").exists()
    assert done.stderr.strip().splitlines()[-1] == (
        f"stallscope: error: {empty}: no line stats here (no lineprof/*.json); run with "
        "--lineprof auto to record them")
