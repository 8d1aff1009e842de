"""The DataLoader card never proposes the value already set (issue 34: the epochs script, at
num_workers=2 on a 2-core machine, was advised `num_workers=2 -> num_workers=2`): it proposes
the next rung up, or, at as many workers as cores, says more cannot help."""

from __future__ import annotations

import json
import os
import re

import pytest
from runner_helpers import run, write_script
from test_run_record import EPOCHS

from stallscope.core.advice import fixes
from stallscope.core.document import analyze_path
from stallscope.core.session.reader import open_session

pytestmark = pytest.mark.runner


@pytest.fixture(scope="module")
def epochs_trace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("epochs")
    proc, session = run(folder, write_script(folder, EPOCHS), "--no-stop-after-window")
    assert proc.returncode == 0, proc.stderr
    recorded_cpus.append(json.loads((session / "run.json").read_text()).get("cpu_count"))
    return open_session(session).traces()[-1]


recorded_cpus: list = []  # what the runner wrote in run.json, before the tests change it


def loader_card(trace, cores: int | None):
    """The card, with run.json saying the recording machine had `cores` usable CPUs (None:
    a session from before the runner recorded them)."""
    run_json = trace.parents[1] / "run.json"
    run = json.loads(run_json.read_text())
    run.pop("cpu_count", None)
    if cores is not None:
        run["cpu_count"] = cores
    run_json.write_text(json.dumps(run))
    report = analyze_path(trace)
    return next(a for a in report.advice if a.id == "dataloader_bound")


def test_the_runner_records_the_machines_cores(epochs_trace):
    assert recorded_cpus == [len(os.sched_getaffinity(0))]


def test_at_as_many_workers_as_cores_more_workers_are_not_proposed(epochs_trace):
    card = loader_card(epochs_trace, 2)  # the machine the session was recorded on
    assert "num_workers=2 -> num_workers=2" not in card.fix
    assert "--set" not in card.fix and "DataLoader(num_workers=" not in card.fix
    assert card.fix.startswith("The loader already runs 2 workers on the training machine's "
                               "2 cores, and each step still waits ")
    assert "{" not in card.fix  # every figure filled in
    assert "persistent_workers=True keeps the workers across epochs" in card.fix


def test_an_older_session_is_taken_as_recorded_here(epochs_trace, monkeypatch):
    monkeypatch.setattr(fixes, "usable_cores", lambda: 2)  # this machine's
    card = loader_card(epochs_trace, None)
    assert card.fix.startswith("The loader already runs 2 workers on this machine's 2 cores")


def test_with_cores_to_spare_the_next_rung_up_is_proposed(epochs_trace, monkeypatch):
    monkeypatch.setattr(fixes, "usable_cores", lambda: 2)  # the reading machine: not asked
    card = loader_card(epochs_trace, 8)  # a GPU box's 8 cores
    proposed = re.search(r"num_workers=2, persistent_workers=False\) -> num_workers=(\d+)\.",
                         card.fix)
    assert proposed is not None, card.fix
    assert 2 < int(proposed[1]) <= 8 and f":num_workers={proposed[1]} -- " in card.fix
