"""The DataLoader card's workers for an IterableDataset say what they need: each worker
iterates the whole stream unless __iter__ takes its own share (hunt: the advice proposed
num_workers=2 for a Stream that did not, which would have fed every sample twice). A real
runner session of a data-bound script; a map-style one gets no such sentence."""

from __future__ import annotations

import pytest
from runner_helpers import run, write_script

from stallscope.core.document import analyze_path
from stallscope.core.session.reader import open_session

pytestmark = pytest.mark.runner

SCRIPT = """
import time, torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

class Stream(IterableDataset):
    def __iter__(self):
        for i in range(96):
            time.sleep(0.01)
            yield torch.randn(8)

class Items(Dataset):
    def __len__(self):
        return 96
    def __getitem__(self, i):
        time.sleep(0.01)
        return torch.randn(8)

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x in DataLoader({dataset}(), batch_size=8):
    loss = model(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("dataset", ["Stream", "Items"])
def test_workers_for_an_iterable_dataset_come_with_its_sharding(tmp_path, dataset):
    script = write_script(tmp_path, SCRIPT.format(dataset=dataset))
    proc, session = run(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    [loader] = open_session(session).loaders()
    assert loader["iterable"] is (dataset == "Stream")
    report = analyze_path(open_session(session).traces()[-1])
    fix = next(a.fix for a in report.advice if "num_workers=" in a.fix)
    said = ("Stream is an IterableDataset: each worker iterates the whole stream unless its "
            "__iter__ takes its own share (torch.utils.data.get_worker_info()")
    assert (said in fix) is (dataset == "Stream"), fix
