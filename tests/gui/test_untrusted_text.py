"""A hostile session, opened in the real main window: every name in it (trace file name, op
names, annotations, device and thread names, run.json's script/args/python/cwd, line stats'
function and file names, the recent list) holds `<img src="file:...">`, a link and a heading.
Every QLabel of every view is plain text or (set_rich) has the names escaped, every tooltip is
shown as text, and no resource is loaded: the image source is a FIFO watched by a child
process, which counts every time anything opens it for reading (Qt would read /dev/zero the
same way, until memory runs out)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import html
import json
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QPoint
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QLabel,
    QPushButton,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from stallscope.core import lineprof
from stallscope.core.recent import RecentStore
from stallscope.gui.dialogs import confirm
from stallscope.gui.widgets import RICH, install_plain_text_guard

pytestmark = pytest.mark.runner  # the app and a resource watch in child processes

RAW_TAGS = ("<img", "<a href=\"x.example\"", "<h1")  # the hostile markup, not our own links

_WATCH = """
import os, sys, time
fifo, log = sys.argv[1], sys.argv[2]
while True:
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # succeeds only while a reader has it
    except OSError:
        time.sleep(0.002)
        continue
    with open(log, "a") as f:
        f.write("opened\\n")
    os.close(fd)  # the reader sees end of file: nothing hangs
"""


class FifoWatch:
    """A FIFO and a child process that counts every open of it for reading."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "resource.fifo"
        self.log = folder / "resource.log"
        os.mkfifo(self.path)
        self.proc = subprocess.Popen([sys.executable, "-c", _WATCH, str(self.path),
                                      str(self.log)])

    @property
    def opened(self) -> int:
        return self.log.read_text().count("opened") if self.log.exists() else 0

    @property
    def url(self) -> str:  # file:%2F...: no slash, so it fits in a file name
        return "file:" + urllib.parse.quote(str(self.path), safe="")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def fifo(tmp_path):
    watch = FifoWatch(tmp_path)
    yield watch
    watch.close()


@pytest.fixture(autouse=True)
def guard(qapp):
    """As in the app (gui/app.py installs it)."""
    return install_plain_text_guard(qapp)


def test_the_watch_sees_qt_load_a_resource(qtbot, fifo):
    """The detector works: a rich label made outside the guard's reach does load the image."""
    label = QLabel()
    qtbot.addWidget(label)
    label.show()
    label.setTextFormat(label.textFormat().RichText)  # after the guard made it plain
    label.setText(f'<img src="{fifo.url}"> x')
    label.adjustSize()
    qtbot.waitUntil(lambda: fifo.opened > 0, timeout=5000)


# ---------------------------------------------------------------------------------------------
# The hostile session


def _evil(fifo: FifoWatch) -> tuple[str, str]:
    """(for text fields, for file names: no slash)."""
    name = f'<img src="{fifo.url}"><a href="x.example">link<h1>big'
    return name + "</a></h1>", name


def _trace(path: Path, evil: str, gpu: bool = True, rank: int | None = None) -> Path:
    events = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": evil}},
              {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": evil}},
              {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": evil}}]
    step = 40_000.0
    for k in range(8):
        t0 = 1_000_000.0 + k * step
        x = dict(ph="X", pid=1, tid=1)
        events += [
            {**x, "name": f"ProfilerStep#{k + 1}", "cat": "user_annotation", "ts": t0,
             "dur": step},
            {**x, "name": f"enumerate(DataLoader)#{evil}.__next__", "cat": "user_annotation",
             "ts": t0, "dur": 0.4 * step},
            {**x, "name": f"## {evil} ##", "cat": "user_annotation", "ts": t0 + 0.4 * step,
             "dur": 0.1 * step},
            {**x, "name": f"aten::{evil}", "cat": "cpu_op", "ts": t0 + 0.5 * step,
             "dur": 0.3 * step},
            {**x, "tid": 2, "name": f"aten::{evil}", "cat": "cpu_op", "ts": t0 + 100,
             "dur": 0.3 * step},
        ]
        if gpu:
            corr = 1000 + k
            events += [
                {**x, "name": "cudaLaunchKernel", "cat": "cuda_runtime",
                 "ts": t0 + 0.5 * step, "dur": 2, "args": {"correlation": corr}},
                {"ph": "X", "pid": 0, "tid": 7, "name": evil, "cat": "kernel",
                 "ts": t0 + 0.5 * step + 5, "dur": 0.45 * step,
                 "args": {"device": 0, "stream": 7, "correlation": corr}},
                {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": t0 + 10,
                 "args": {"Device Type": 1, "Device Id": 0, "Bytes": 1 << 20,
                          "Total Allocated": (k + 1) << 20, "Total Reserved": 64 << 20}},
            ]
    doc = {"traceEvents": events,
           "deviceProperties": [{"id": 0, "name": evil, "totalGlobalMem": 1 << 34}]}
    if rank is not None:
        doc["distributedInfo"] = {"backend": evil, "rank": rank, "world_size": 2}
    path.write_text(json.dumps(doc))
    return path


def hostile_session(root: Path, fifo: FifoWatch, gpu: bool = True) -> Path:
    evil, evil_name = _evil(fifo)
    code = root / f"code{evil_name}"
    code.mkdir(parents=True)
    script = code / f"train{evil_name}.py"
    script.write_text("print('training')\n")
    data = code / "data.py"
    data.write_text("class EvilSet:\n    def __len__(self):\n        return 3\n\n"
                    "    def __getitem__(self, i):\n        return i\n")
    session = root / f"session{evil_name}"
    (session / "traces").mkdir(parents=True)
    _trace(session / "traces" / f"{evil_name}.pt.trace.json", evil, gpu)
    (session / "run.json").write_text(json.dumps({
        "version": 1, "script": str(script), "args": [evil, "--lr", evil],
        "python": f"/elsewhere/{evil}/python", "cwd": f"/elsewhere/{evil}",
        "dataloaders": [{"site": f"{script.name}:3", "file": str(data), "line": 3,
                         "dataset": "EvilSet"}]}))
    (session / "events.jsonl").write_text(json.dumps({"event": "started", "t": 0.0}) + "\n")
    source = code / f"ds{evil_name}.py"
    source.write_text(f"class Ds:\n    def __getitem__(self, i):\n        x = '{evil}'\n"
                      "        return x\n")
    lines = [lineprof.Line(2, 8, 0.0, "    def __getitem__(self, i):"),
             lineprof.Line(3, 8, 0.6, f"        x = '{evil}'"),
             lineprof.Line(4, 8, 0.1, "        return x")]
    lineprof.save(lineprof.Profile(evil, f"Ds.{evil}", str(source), 2, lines, samples=8),
                  session / "lineprof" / "Ds.__getitem__.json")
    return session


# ---------------------------------------------------------------------------------------------
# The walk


def _violations(root) -> list[str]:
    """Every label under `root` (the window: its dialogs, tooltips and tabs are its children)
    that would render a name as HTML, every tooltip shown with raw tags."""
    bad = []
    for w in [root, *root.findChildren(QWidget)]:
        if isinstance(w, QLabel) and w.metaObject().className() != "QTipLabel":
            text = w.text()
            plain = w.textFormat() == w.textFormat().PlainText
            if not plain and not (w.property(RICH) and not any(t in text for t in RAW_TAGS)):
                bad.append(f"label {_where(w)}: {w.textFormat().name} {text[:80]!r}")
        if w.isVisible() and any(t in w.toolTip() for t in RAW_TAGS):
            bad += _tip(w, w.rect().center(), _where(w))
        if isinstance(w, QAbstractItemView) and w.isVisible() and w.model() is not None:
            model = w.model()
            root = w.rootIndex()
            try:
                cols = model.columnCount(root)
            except TypeError:  # a list model: one column
                cols = 1
            for row in range(min(model.rowCount(root), 50)):
                for col in range(cols):
                    index = model.index(row, col, root)
                    tip = index.data(3)  # ToolTipRole
                    if isinstance(tip, str) and any(t in tip for t in RAW_TAGS):
                        rect = w.visualRect(index)
                        if rect.isValid() and w.viewport().rect().contains(rect.center()):
                            bad += _tip(w.viewport(), rect.center(), f"{_where(w)}[{row},{col}]")
    return bad


def _tip(widget, pos: QPoint, where: str) -> list[str]:
    QToolTip.hideText()
    QApplication.sendEvent(widget, QHelpEvent(QEvent.Type.ToolTip, pos,
                                              widget.mapToGlobal(pos)))
    shown = QToolTip.text()
    QToolTip.hideText()
    return [f"tooltip {where}: {shown[:80]!r}"] if any(t in shown for t in RAW_TAGS) else []


def _where(w) -> str:
    names = []
    while w is not None and len(names) < 4:
        names.append(w.objectName() or type(w).__name__)
        w = w.parentWidget()
    return "/".join(reversed(names))


def _settle(qtbot, ms: int = 150) -> None:
    qtbot.wait(ms)
    QApplication.processEvents()


def _visit_tabs(qtbot, window) -> list[str]:
    bad = []
    for i in range(window.tabs.count()):
        window.tabs.setCurrentIndex(i)
        _settle(qtbot)
        bad += _violations(window)
    return bad


def test_a_hostile_session_renders_as_text_everywhere(qtbot, tmp_path, fifo, monkeypatch):
    from stallscope.gui.main_window import MainWindow

    session = hostile_session(tmp_path / "a", fifo)
    cpu_only = hostile_session(tmp_path / "b", fifo, gpu=False)
    trace = next((session / "traces").iterdir())
    store = RecentStore(tmp_path / "recent.json")
    evil, _ = _evil(fifo)
    store.add(trace, headline=f"GPU idle 40%, mostly {evil}")
    store.add(tmp_path / f"gone{_evil(fifo)[1]}.json", headline=evil)

    # the app starts with that recent list (the start screen sizes its rows before showing)
    window = MainWindow(recent_store=store)
    qtbot.addWidget(window)
    window.resize(1400, 900)
    window.show()
    _settle(qtbot)
    bad = _violations(window)
    assert str(trace) in window.start.recent_paths()

    with qtbot.waitSignal(window.sig_document_shown, timeout=60_000):
        window.open_path(str(session))
    qtbot.waitUntil(lambda: not window.heatmaps.stats.busy, timeout=30_000)
    _settle(qtbot)
    bad += _visit_tabs(qtbot, window)
    with qtbot.waitSignal(window.sig_compare_shown, timeout=60_000):
        window.open_compare(str(cpu_only))
    _settle(qtbot)
    bad += _visit_tabs(qtbot, window)
    with qtbot.waitSignal(window.sig_document_shown, timeout=60_000):
        window.open_path(str(cpu_only))  # the CPU-only summary lists the threads
    _settle(qtbot)
    bad += _visit_tabs(qtbot, window)

    # a folder of two ranks' hostile traces: the ranks table and its tooltips
    ranks = tmp_path / f"ranks{_evil(fifo)[1]}"
    ranks.mkdir()
    for r in (0, 1):
        _trace(ranks / f"{_evil(fifo)[1]}_rank{r}.pt.trace.json", evil, rank=r)
    with qtbot.waitSignal(window.sig_document_shown, timeout=120_000):
        window.open_path(str(ranks))
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=60_000)
    _settle(qtbot, 300)
    assert window.document.multi_rank
    bad += _visit_tabs(qtbot, window)

    # the confirmation before a tune shows run.json's values as text; it is where they stop
    shown: list[str] = []

    def look(dialog):
        dialog.show()
        _settle(qtbot)
        shown.append(dialog.shown_text())
        bad.extend(_violations(window))
        return False  # the user says no: nothing opens

    monkeypatch.setattr(confirm, "answer", look)
    with qtbot.waitSignal(window.sig_document_shown, timeout=60_000):
        window.open_path(str(session))
    assert window.fix_loop.try_it() is None and window.fix_loop.tune_dialog is None
    assert evil in shown[0] and f"/elsewhere/{evil}/python" in shown[0]
    assert window.fix_loop.open_lmdb() is not None  # declined: the wizard opens, unfilled
    assert window.fix_loop.wizard.source_page.spec_edit.text() == ""
    _settle(qtbot)
    bad += _violations(window)
    window.fix_loop.wizard.close()

    assert bad == []
    assert fifo.opened == 0  # no label, tooltip or plot item loaded the image


# ---------------------------------------------------------------------------------------------
# The helper and the guard, one widget at a time


def _shown_tip(widget, pos: QPoint) -> str:
    QToolTip.hideText()
    QApplication.sendEvent(widget, QHelpEvent(QEvent.Type.ToolTip, pos, widget.mapToGlobal(pos)))
    return QToolTip.text()


def test_set_rich_escapes_the_values_and_the_guard_keeps_it(qtbot, fifo):
    from stallscope.gui.widgets import plain_label, rich_label, set_rich

    evil, _ = _evil(fifo)
    label = rich_label("<b>Ranks</b> · {}", evil)
    plain = plain_label(evil)
    forgot = QLabel(evil)  # a view that forgot: the guard makes it plain when it is laid out
    box = QWidget()
    lay = QVBoxLayout(box)
    for w in (label, plain, forgot):
        lay.addWidget(w)
    qtbot.addWidget(box)
    box.show()
    _settle(qtbot)
    assert label.textFormat() == label.textFormat().RichText and label.property(RICH)
    assert label.text().startswith("<b>Ranks</b> · &lt;img src=&quot;file:")
    assert plain.textFormat() == forgot.textFormat() == plain.textFormat().PlainText
    set_rich(forgot, "<i>{}</i>", evil)
    assert forgot.text() == f"<i>{html.escape(evil)}</i>"
    assert fifo.opened == 0


def test_tooltips_that_look_like_html_are_shown_as_text(qtbot, fifo):
    from PySide6.QtGui import QStandardItem, QStandardItemModel
    from PySide6.QtWidgets import QGraphicsRectItem, QGraphicsScene, QGraphicsView, QListView

    from stallscope.gui.widgets import set_rich_tooltip

    evil, _ = _evil(fifo)
    box = QWidget()
    lay = QVBoxLayout(box)
    button = QPushButton("x")
    button.setToolTip(evil)
    rich_tip = QPushButton("y")
    set_rich_tooltip(rich_tip, "<b>{}</b>", evil)
    items = QListView()
    model = QStandardItemModel()
    row = QStandardItem("row")
    row.setToolTip(evil)
    model.appendRow(row)
    items.setModel(model)
    scene = QGraphicsScene()
    rect = QGraphicsRectItem(0, 0, 50, 50)
    rect.setToolTip(evil)
    scene.addItem(rect)
    view = QGraphicsView(scene)
    for w in (button, rich_tip, items, view):
        lay.addWidget(w)
    qtbot.addWidget(box)
    box.resize(300, 500)
    box.show()
    _settle(qtbot)
    escaped = html.escape(evil, quote=False)
    assert escaped in _shown_tip(button, QPoint(2, 2))
    assert _shown_tip(rich_tip, QPoint(2, 2)) == f"<b>{html.escape(evil)}</b>"  # as built
    center = items.visualRect(model.index(0, 0)).center()
    assert escaped in _shown_tip(items.viewport(), center)
    at = view.mapFromScene(rect.boundingRect().center())
    assert escaped in _shown_tip(view.viewport(), at)
    QToolTip.hideText()
    _settle(qtbot)
    assert fifo.opened == 0


def test_stallscope_opens_a_session_with_hostile_line_stats_without_freezing(tmp_path):
    """`stallscope SESSION` (the app, offscreen, screenshot mode): line stats that are a FIFO,
    a link to /dev/zero and a `file` field naming /dev/zero neither block nor fill memory."""
    session = tmp_path / "session"
    (session / "traces").mkdir(parents=True)
    _trace(session / "traces" / "train.pt.trace.json", "aten::mm")
    (session / "run.json").write_text(json.dumps({"script": "train.py"}))
    folder = session / "lineprof"
    lines = [lineprof.Line(2, 8, 0.5, "        x = load(i)")]
    lineprof.save(lineprof.Profile("__getitem__", "Ds.__getitem__", "/dev/zero", 1, lines,
                                   samples=8), folder / "Ds.__getitem__.json")
    os.mkfifo(folder / "fifo.json")
    (folder / "zero.json").symlink_to("/dev/zero")
    out = tmp_path / "shot.png"
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "stallscope.gui.app", "--screenshot", str(out),
                           str(session)], capture_output=True, text=True, timeout=180,
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0 and time.monotonic() - t < 120
    # what the app reads for the heatmap: the readable profile, the others named
    _, profiles = lineprof.read_stats(session)
    assert profiles[0].match.warning.startswith("/dev/zero: source file is a character device")
    assert len(profiles[0].warnings) == 2


def test_the_apps_own_error_lines_escape_control_characters(tmp_path):
    name = tmp_path / "x\x1b]0;pwned\x07\u202e.json"
    proc = subprocess.run([sys.executable, "-m", "stallscope.gui.app", "--screenshot",
                           str(tmp_path / "o.png"), str(name)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert proc.returncode == 2
    assert "x\\x1b]0;pwned\\x07\\u202e.json: no such file or folder" in proc.stderr
    assert not any(c in proc.stderr for c in "\x1b\x07\u202e")
