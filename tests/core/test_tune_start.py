"""What the first trial (the script as written) tells the search (core/tune/job.py
_start_search): the DataLoader to tune and whether its epochs are short. Its session is a
stand-in holding the events the runner wrote for hunt's s5_while_next.py: 90 steps, epochs of
40 batches, the last one cut by the script's max_steps."""

from __future__ import annotations

import types
from pathlib import Path

from stallscope.core.tune import TuneResult, job
from stallscope.core.tune.trial import OK, Trial

SITE = "s5_while_next.py:12"
LOADER = {"site": SITE, "file": "/w/s5_while_next.py", "line": 12, "batches": 90,
          "passed": {"num_workers": 0}, "effective": {"num_workers": 0}}


def start(tmp_path: Path, monkeypatch, starts: list[int], steps: int = 90, ranks=(None,)):
    """The result and the search _start_search makes of a first trial of `steps` steps whose
    tuned DataLoader started epochs at those steps (on each of `ranks`)."""
    events = [{"event": "epoch", "site": SITE, "epoch": i, "n": n,
               **({} if rank is None else {"rank": rank})}
              for rank in ranks for i, n in enumerate(starts)]
    session = types.SimpleNamespace(loaders=lambda: [LOADER], events=events, run={})
    monkeypatch.setattr(job, "open_session", lambda path: session)
    base = Trial(1, "01-as-written", {}, {}, session=str(tmp_path), status=OK, step_ms=25.7,
                 steps=steps)
    result = TuneResult(tmp_path, "/w/s5_while_next.py", [])
    launch = types.SimpleNamespace(site="")
    search = job._start_search(result, base, launch, 2, 16, 0.05)
    assert search is not None
    return result, search


def test_short_epochs_are_the_steps_between_their_starts(tmp_path, monkeypatch):
    # hunt item 8: "starts its DataLoader anew every 30 steps" (90 steps / 3 starts)
    result, search = start(tmp_path, monkeypatch, [0, 40, 80])
    assert search.epoch_steps == 40
    assert ("the script starts its DataLoader anew every 40 steps: workers in the climb are "
            "kept across epochs (persistent_workers=True)") in result.notes, result.notes
    # under torchrun each rank starts the same epochs
    _, ranked = start(tmp_path, monkeypatch, [0, 40, 80], ranks=(0, 1))
    assert ranked.epoch_steps == 40
    # long epochs: not short, no note
    result, search = start(tmp_path, monkeypatch, [0, 80], steps=90)
    assert search.epoch_steps is None and not any("anew" in n for n in result.notes)


def test_epoch_length_is_the_median_gap_between_starts():
    assert job.epoch_length([{"n": n} for n in (0, 40, 80)]) == 40
    assert job.epoch_length([{"n": n} for n in (0, 8, 16, 24, 31)]) == 8
    assert job.epoch_length([{"n": 0}, {"n": 0}]) is None  # no two starts apart
    assert job.epoch_length([{"n": "x"}, {}]) is None
