"""The whole run's stall titles read as English for one worker as for many (hunt: "while 1
worker start"). A record of 40 steps whose 4 epochs each began with a 500 ms pause."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stallscope.core.session import stalls
from stallscope.core.session.record import BLOCK_DTYPE, STEP_DTYPE, Record


def record(workers: int) -> Record:
    steps = np.zeros(40, STEP_DTYPE)
    steps["n"] = np.arange(40)
    steps["t"] = np.arange(40) * 0.02
    steps["wall_ms"], steps["data_wait_ms"] = 20.0, 5.0
    epochs = [{"loader": 0, "site": "train.py:9", "epoch": i, "n": 10 * i,
               "first_batch_ms": 500.0, "previous_end_ms": 0.0, "workers": workers,
               "persistent_workers": False} for i in range(4)]
    return Record(Path("record.bin"), 0.0, 0, np.zeros(0, BLOCK_DTYPE), steps, epochs=epochs)


@pytest.mark.parametrize(("workers", "words"), [(1, "while 1 worker starts:"),
                                                (2, "while 2 workers start:")])
def test_an_epoch_start_pause_names_its_workers_in_english(workers, words):
    found = stalls._epoch_starts(record(workers), 40 * 20.0, 20.0)
    assert found is not None and words in found.title, found
