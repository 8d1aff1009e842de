"""File > Export's Perfetto choice: written off the GUI thread, said in the message strip, and
the file reopens in stallscope with the figures of the trace it came from."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import json  # noqa: E402

import pytest  # noqa: E402
from fixture_traces import fixture_path  # noqa: E402

from stallscope.core.analysis import analyze  # noqa: E402
from stallscope.core.trace import load  # noqa: E402
from stallscope.gui.controllers import export  # noqa: E402


def test_perfetto_export_from_the_window(qtbot, window, open_and_wait, tmp_path):
    src = fixture_path("kineto_nw0")
    open_and_wait(src)
    out = tmp_path / "annotated.json"
    shown = []
    window.show_message = lambda text, level="error": shown.append((level, text))
    export.export_perfetto(window, str(out))
    # the result's message: its handler is connected before the job starts (a wait for the
    # worker's own signal, connected after, would miss a job that finished first)
    qtbot.waitUntil(lambda: any("Saved" in t for _, t in shown), timeout=120_000)
    assert not [t for level, t in shown if level == "error"]
    doc = json.loads(out.read_text())
    names = {e.get("name", "") for e in doc["traceEvents"]}
    assert any(n.startswith("idle: ") for n in names)
    before, after = analyze(load(src)), analyze(load(out))
    for dev, stats in before.devices.items():
        assert after.devices[dev].idle_by_cause == pytest.approx(stats.idle_by_cause)
        assert after.devices[dev].busy_us == pytest.approx(stats.busy_us)


def test_perfetto_is_one_of_the_export_choices():
    assert export.PERFETTO_FILTER in export.EXPORT_FILTERS.split(";;")
