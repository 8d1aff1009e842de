"""The DataLoader card's workers for an IterableDataset say what they need: each worker
iterates the whole stream unless __iter__ takes its own share (hunt: the advice proposed
num_workers=2 for a stream that did not, which would have fed every sample twice). A real
runner session of a data-bound script; a map-style one gets no such sentence."""

from __future__ import annotations

import pytest
from runner_helpers import run, write_script
from scripts import training

from stallscope.core.document import analyze_path
from stallscope.core.session.reader import open_session

pytestmark = pytest.mark.runner

# 96 items of 10 ms each in batches of 8: data-bound, as a stream or map-style
SCRIPTS = {"iterable": training(items=96, item_s=0.01, iterable=True),
           "map-style": training(items=96, item_s=0.01)}


@pytest.mark.parametrize("dataset", sorted(SCRIPTS))
def test_workers_for_an_iterable_dataset_come_with_its_sharding(tmp_path, dataset):
    script = write_script(tmp_path, SCRIPTS[dataset])
    proc, session = run(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    [loader] = open_session(session).loaders()
    assert loader["iterable"] is (dataset == "iterable")
    report = analyze_path(open_session(session).traces()[-1])
    fix = next(a.fix for a in report.advice if "num_workers=" in a.fix)
    said = ("Slow is an IterableDataset: each worker iterates the whole stream unless its "
            "__iter__ takes its own share (torch.utils.data.get_worker_info()")
    assert (said in fix) is (dataset == "iterable"), fix
