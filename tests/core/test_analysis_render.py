"""The CLI text and the Markdown export show everything the Report holds, in units' format."""

from __future__ import annotations

import re

from stallscope.core import causes
from stallscope.core.analysis import analyze
from stallscope.core.render.export import report_to_markdown, save_report
from stallscope.core.render.text import render
from stallscope.core.trace import load
from stallscope.core.units import duration, ms, pct

RAW_FLOAT = re.compile(r"\d\.\d{3,}")  # a number that skipped core/units.py


def test_text_report_of_a_two_thread_ddp_rank(real_trace):
    report = analyze(load(real_trace("hta_sampled_rank-0")))
    text = render(report)
    stats = report.devices[0]
    assert not RAW_FLOAT.search(text), RAW_FLOAT.search(text)
    for label in map(causes.label, causes.CAUSES):
        assert f"\n  {label} " in text, label
    assert f"GPU 0: utilization {pct(stats.utilization):>6}" in text
    assert "!! GPU 0 is busy only 44.5% of the time" in text
    assert "python by annotation:" in text and "## recmetrics_update ##" in text
    assert "launching threads besides the main thread: pid 4037 tid 23695" in text
    assert (f"communication {ms(stats.comm_us)}, exposed {ms(stats.exposed_comm_us)}"
            in text)
    top = report.ceilings[0]
    assert f"GPU 0: {top.text} ({duration(top.cause_us)} of {duration(top.base_us)})" in text
    card = report.advice[0]
    assert f"[{card.id}] {card.title} (could save up to {duration(card.saving_us)}, " in text
    assert text.index("[exposed_comm]") < text.index("[stream_wait]")


def test_text_report_without_a_gpu(real_trace):
    report = analyze(load(real_trace("hta_cpu_only")))
    text = render(report)
    assert "No GPU activity in this trace: the main thread's step time (210.11 ms) by cause" \
        in text
    assert "queued work" not in text  # no GPU op was ever queued
    # one step (issue 22): its ceilings are not quoted, the collectives on gloo's threads are
    assert report.window_kind == "one_step"
    assert "the whole step time is Python between ops" not in text
    assert "ceilings: withheld for a trace too short to judge (see the first card)" in text
    assert "This window is a single step: The 210.11 ms window holds one step " \
        "(ProfilerStep#551)" in text
    assert "withheld for a trace too short to judge (if this were steady):\n" \
        "  [collective_wait] The step waits on collectives running on other threads" in text


def test_markdown_export(real_trace, tmp_path):
    report = analyze(load(real_trace("kineto_nw0")))
    md = report_to_markdown(report)
    assert not RAW_FLOAT.search(md.replace(report.trace.path.name, "TRACE"))
    assert "| device | utilization | busy | idle | gaps | idle: queued work |" in md
    assert "## Ceilings" in md and "- GPU 0: up to 1.51x faster if the GPU never waited" in md
    assert "### The GPU waits for data\n" in md
    assert "### Host-to-device copies come from pageable memory\n" in md
    assert "- could save: 352.40 ms (33.6% of the window)" in md
    assert "| ProfilerStep#5 | 176.08 ms | 68.69 ms | 26.32 ms | 89.38 ms | data loading |" in md
    path = save_report(report, tmp_path / "r.md")
    assert path.read_text(encoding="utf-8") == md


def test_tagline_says_a_start_up_window(real_trace):
    from stallscope.core.render.tagline import tagline

    amd = analyze(load(real_trace("hta_amd_trace")))
    assert tagline(amd) == "GPU idle 98%, mostly backward on the autograd threads (start-up " \
                            "window)"
    assert not tagline(analyze(load(real_trace("kineto_nw0")))).endswith(")")
