"""Help > Getting started / Reading the timeline / Idle causes / Keyboard shortcuts: the README's
key sections inside the app (an installed app has no README beside it), one dialog with a
section per menu entry. The shortcut list is read from the window's own actions, so it cannot
drift from the menus.
"""

from __future__ import annotations

import html

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

from stallscope.core import causes
from stallscope.core.causes import BY_CODE, CAUSES

SECTIONS = {"start": "Getting started", "timeline": "Reading the timeline",
            "causes": "Idle causes", "keys": "Keyboard shortcuts"}

GETTING_STARTED = """
<p>stallscope tells you <b>why your GPU waits during PyTorch training, and what to change</b>.
It charges every microsecond the GPU sits idle to what the CPU was doing at that moment and
turns the numbers into advice, largest saving first.</p>
<ul>
<li><b>Open</b> a trace (<code>.pt.trace.json(.gz)</code>), a session folder, a TensorBoard log
folder or a folder of ranks' traces: File &#9656; Open, drag and drop, or the start screen's
recent list.</li>
<li><b>Run</b> your unmodified script under the profiler: Run &#9656; Run script&hellip;; watch
step time and data wait live; the session folder opens when it ends.</li>
<li><b>Try a fix</b>: a card's <i>Try it</i> reruns the script with other DataLoader settings and
shows the measured speed-up. Headless: <code>stallscope-cli tune -- train.py</code>.</li>
<li><b>Compare</b> before and after: File &#9656; Compare with&hellip;</li>
<li><b>Slow data loading</b>: the line heatmap of <code>Dataset.__getitem__</code> and
Tools &#9656; Convert dataset to LMDB&hellip;</li>
</ul>
<p>On a GPU box without a display: <code>stallscope-cli run --session runs/a -- train.py</code>,
then copy the folder and open it here.</p>
"""

TIMELINE = """
<p>One row per device and thread on one time axis (milliseconds since the first step's
start):</p>
<ul>
<li><b>steps</b>: the <code>ProfilerStep#N</code> annotations.</li>
<li><b>GPU (or MTIA, ...) lane</b>: busy time rises in the upper band, communication with
nothing else running in its own colour; idle time hangs in the lower band, coloured by cause.
Every pixel column is filled in proportion to its time: a column the GPU was busy 13% of is
13% filled, so areas are time at every zoom. Zoom in to see single kernels and gaps.</li>
<li><b>Streams</b> (the button above the lanes): one labelled sub-lane per stream, with its role
(compute, communication, copy).</li>
<li><b>CPU main thread</b>: what it was in, by cause; <b>CPU backward</b>: the autograd
threads that launch GPU work; in a trace without a GPU, the busiest other threads.</li>
<li><b>Memory</b>: allocated (and reserved) memory, where the trace recorded it.</li>
</ul>
<p>The line above the lanes says what is under the pointer. Click a cause or a card in the panel
on the right to jump to its worst gap.</p>
"""


def causes_html() -> str:
    rows = "".join(f"<tr><td><b>{html.escape(causes.label(c))}</b></td>"
                   f"<td>{html.escape(BY_CODE[c].description)}</td></tr>" for c in CAUSES)
    return ("<p>Every idle microsecond of a GPU goes to the first of these that covers it; the "
            "eight add up to the idle time.</p>"
            f"<table cellspacing='0' cellpadding='3'>{rows}</table>")


MOUSE = (("Mouse wheel", "zoom the timeline"), ("Drag", "pan"),
         ("Shift + drag", "zoom to a box"), ("Double-click", "fit the whole window"))


def shortcuts_html(actions: dict[str, QAction]) -> str:
    """Every action with a shortcut, in the menus' order, then the timeline's mouse gestures."""
    rows = []
    for name, action in actions.items():
        keys = [k.toString(QKeySequence.SequenceFormat.NativeText) for k in action.shortcuts()]
        if keys:
            rows.append((" or ".join(keys), name))
    rows += MOUSE
    cells = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(what)}</td></tr>"
                    for k, what in rows)
    return f"<table cellspacing='0' cellpadding='3'>{cells}</table>"


def help_html(actions: dict[str, QAction]) -> str:
    bodies = {"start": GETTING_STARTED, "timeline": TIMELINE, "causes": causes_html(),
              "keys": shortcuts_html(actions)}
    return "".join(f"<h2><a name='{key}'></a>{title}</h2>{bodies[key]}"
                   for key, title in SECTIONS.items())


class HelpDialog(QDialog):
    """The help text, scrolled to one section."""

    def __init__(self, actions: dict[str, QAction], section: str = "start",
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"stallscope help: {SECTIONS.get(section, SECTIONS['start'])}")
        self.resize(640, 560)
        self.browser = QTextBrowser()
        self.browser.setOpenExternalLinks(False)
        self.browser.setHtml(help_html(actions))  # our own text: no string from a trace
        layout = QVBoxLayout(self)
        layout.addWidget(self.browser, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.show_section(section)

    def show_section(self, section: str) -> None:
        self.setWindowTitle(f"stallscope help: {SECTIONS.get(section, SECTIONS['start'])}")
        self.browser.scrollToAnchor(section)
