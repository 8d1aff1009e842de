"""Causes are joined by name: inserting a cause anywhere in causes.CAUSE_LIST (here a probe with
no intervals, at every position) leaves every charge of every other cause where it was, on real
traces, per device, per step and on the main thread."""

from __future__ import annotations

import dataclasses

import pytest
from fixture_traces import fixture_path

from stallscope.core import causes
from stallscope.core.analysis import analyze
from stallscope.core.trace import load

TRACES = ("kineto_nw0", "hta_nccl_parser_config", "hta_cpu_only", "hta_amd_trace")


def charges(report) -> dict:
    out = {}
    for dev, stats in report.devices.items():
        out.update({("dev", dev, c): us for c, us in stats.idle_by_cause.items()})
        out.update({("spans", dev, c): float((s[:, 1] - s[:, 0]).sum())
                    for c in causes.CAUSES for s in [stats.spans_of(c)]})
    for k, step in enumerate(report.steps):
        for dev, by in step.idle_by_cause.items():
            out.update({("step", k, dev, c): us for c, us in by.items()})
        out.update({("host_step", k, c): us for c, us in step.host_by_cause.items()})
    out.update({("host", c): us for c, us in report.host_by_cause.items()})
    return out


def with_probe(monkeypatch, at: int) -> None:
    probe = dataclasses.replace(causes.CAUSE_LIST[1], code="probe", label="probe")
    listed = list(causes.CAUSE_LIST)
    listed.insert(at, probe)
    monkeypatch.setattr(causes, "CAUSE_LIST", tuple(listed))
    monkeypatch.setattr(causes, "CAUSES", tuple(c.code for c in listed))
    monkeypatch.setattr(causes, "HOST_CAUSES", tuple(c.code for c in listed if c.host))
    monkeypatch.setattr(causes, "BY_CODE", {c.code: c for c in listed})


@pytest.mark.parametrize("prefix", TRACES)
def test_inserting_a_cause_anywhere_keeps_every_charge(prefix, monkeypatch):
    trace = load(fixture_path(prefix))
    before = charges(analyze(trace))
    assert sum(v for k, v in before.items() if k[0] == "dev" or k[0] == "host") > 0
    for at in range(len(causes.CAUSE_LIST) + 1):
        with monkeypatch.context() as m:
            with_probe(m, at)
            after = charges(analyze(trace))
        probe = {k: v for k, v in after.items() if "probe" in k}
        assert probe and all(v == 0 for v in probe.values()), at
        rest = {k: v for k, v in after.items() if "probe" not in k}
        assert rest.keys() == before.keys()
        for k, v in before.items():
            assert rest[k] == pytest.approx(v, abs=1e-6), (at, k)


def test_an_unknown_layer_name_is_refused():
    import numpy as np

    from stallscope.core.analysis.idle import paint_causes
    with pytest.raises(KeyError, match="dataloading"):
        paint_causes(np.array([[0.0, 1.0]]), {"dataloading": np.array([[0.0, 1.0]])})
