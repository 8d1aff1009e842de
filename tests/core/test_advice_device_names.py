"""Advice and headlines name the device by its kind (issue 23): on an MTIA trace the cards,
the low-utilization headline, the CLI text and the tagline say "MTIA 0", never "GPU 0"."""

from __future__ import annotations

import json

from synthetic_traces import cause_trace

from stallscope.core.analysis import analyze
from stallscope.core.render import text
from stallscope.core.render.tagline import tagline
from stallscope.core.trace import load

MTIA_CATS = {"cuda_runtime": "mtia_runtime", "kernel": "mtia_ccp_events"}


def _as_mtia(path):
    """The same events, filed under MTIA's categories (its runtime's launches, its device's
    command-processor events)."""
    doc = json.loads(path.read_text())
    for e in doc["traceEvents"]:
        e["cat"] = MTIA_CATS.get(e.get("cat"), e.get("cat"))
    path.write_text(json.dumps(doc))
    return path


def test_an_mtia_trace_is_named_mtia_everywhere(tmp_path):
    gpu = analyze(load(cause_trace(tmp_path / "gpu.json", "data_loading", share=0.6)))
    mtia = analyze(load(_as_mtia(cause_trace(tmp_path / "mtia.json", "data_loading",
                                             share=0.6))))
    assert mtia.trace.device_kind == "MTIA"
    # the same numbers, only the device's name differs
    assert mtia.devices[0].idle_by_cause == gpu.devices[0].idle_by_cause
    assert [a.id for a in mtia.advice] == [a.id for a in gpu.advice]
    card = next(a for a in mtia.advice if a.id == "dataloader_bound")
    assert card.title == "The MTIA waits for data"
    assert card.evidence.startswith("MTIA 0 idles ") and "(MTIA utilization " in card.evidence
    low = next(h for h in mtia.headlines if h.id == "low_utilization")
    assert low.title.startswith("MTIA 0 is busy only ")
    assert "GPU 0" not in low.evidence and " in 10 gaps" in low.evidence
    out = text.render(mtia)
    assert "MTIA 0: utilization" in out and "GPU 0" not in out
    assert "MTIA 0 busy" in out  # the steps table's column
    assert tagline(mtia).startswith("MTIA idle ")
    assert card.evidence.replace("MTIA", "GPU") == next(
        a for a in gpu.advice if a.id == "dataloader_bound").evidence
