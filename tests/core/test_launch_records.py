"""One event model: every record the runner writes (core/capture, dicts) is checked against the
typed events every reader uses (core/session/events.py). A field renamed on one side, or a kind
the readers do not know, fails here instead of reading as a silent default."""

from __future__ import annotations

import dataclasses
import time

import pytest
from runner_helpers import write_script
from scripts import training

from stallscope.core.capture import layout
from stallscope.core.launch import Job, Where, start
from stallscope.core.session import events as ev
from stallscope.core.session.reader import read_events

pytestmark = pytest.mark.runner

# fields a record carries only sometimes (a GPU, an exception, a warning, a partial window, a
# thinned step line)
OPTIONAL = {"cuda_allocated", "cuda_reserved", "exception", "warning", "complete", "code",
            "python", "traces", "dataloaders", "notes", "overridden", "devices", "rc",
            "span_steps", "span_data_wait_ms"}
BASE = {f.name for f in dataclasses.fields(ev.Event)}


def test_every_record_the_runner_writes_is_a_typed_event_with_its_fields(tmp_path):
    script = write_script(tmp_path, training(items=64))
    run = start(Where(), Job(script=str(script), args=[], session=tmp_path / "s",
                             options={"stop_after_window": False,
                                      "sets": ["nowhere.py:1:num_workers=1"]}))
    typed_seen: list[ev.Event] = []
    while run.running:
        typed_seen += run.poll()
        time.sleep(0.05)
    typed_seen += run.poll()
    records = read_events(tmp_path / "s" / layout.EVENTS)
    kinds = {r["event"] for r in records}
    assert {layout.STARTED, layout.DATALOADER, layout.STEP, layout.TRACE_READY,
            layout.WARNING, layout.FINISHED} <= kinds
    assert kinds <= set(layout.EVENT_KINDS), kinds - set(layout.EVENT_KINDS)
    for record in records:
        event = ev.typed(record)
        assert event.raw is record
        if type(event) is ev.Event:  # epoch, save, run_tail: read from .raw by the record
            assert record["event"] in (layout.EPOCH, layout.SAVE, layout.RUN_TAIL)
            continue
        fields = {f.name for f in dataclasses.fields(event)} - BASE
        missing = {f for f in fields if f not in record} - OPTIONAL
        assert not missing, f"{record['event']}: typed fields the runner does not write: {missing}"
    # what the launcher hands out is the same model, in the order written
    assert [e.kind for e in typed_seen if e.kind != layout.TRACE_READY] == \
        [r["event"] for r in records if r["event"] != layout.TRACE_READY]
