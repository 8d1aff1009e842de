"""`stallscope-cli tune --nproc-per-node 2` on a tiny gloo DDP script (CPU): every trial runs
under torchrun, and the trial's figure is the slowest rank's steady step time (issue 21)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from runner_helpers import write_script
from tune_json import assert_one_number

from stallscope.core.session.reader import open_session
from stallscope.core.tune import load_result

pytestmark = pytest.mark.runner

# Rank 1 reads from a slower store (60 vs 40 ms of sleep a batch), both compute 50 ms a step:
# without workers rank 1 takes ~110 ms a step and rank 0 waits for it in the all-reduce; one
# worker a rank hides the data behind the compute (~60 ms a step).
DDP = """
import time, torch, torch.distributed as dist
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.set_num_threads(1)

class Remote(Dataset):
    def __len__(self):
        return 960
    def __getitem__(self, i):
        time.sleep(0.005 if rank == 0 else 0.0075)
        return torch.zeros(8), torch.zeros(1)

data = Remote()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data), num_workers=0)
for x, y in loader:
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.05)
dist.destroy_process_group()
"""


def test_tune_under_torchrun_compares_the_slowest_rank(tmp_path):
    script = write_script(tmp_path, DDP, "train_ddp.py")
    out = tmp_path / "tune"
    proc = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "tune", "--out",
                           str(out), "--nproc-per-node", "2", "--max-workers", "1",
                           "--max-trials", "2", "--", str(script)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=400)
    assert proc.returncode == 0, proc.stderr
    result = load_result(out)
    assert_one_number(json.loads((out / "tune.json").read_text()))
    assert result.nproc_per_node == 2
    assert [(t.label, t.status) for t in result.trials] == [("as written", "ok"),
                                                            ("num_workers=1", "ok")]
    for t in result.trials:
        s = open_session(t.session)
        assert s.ranks == [0, 1] and (Path(t.session) / "events.rank1.jsonl").is_file()
        windows = s.steady_by_rank()
        # the trial's figure is the slowest rank's; its data wait the rank that waits most
        assert t.step_ms == max(w.step_ms for w in windows.values())
        assert t.rank == max(windows, key=lambda r: windows[r].step_ms)
        assert t.data_wait_share == max(w.data_wait_share for w in windows.values())
        assert t.steady_reached and t.steady_steps >= 20
        assert f"(slowest rank {t.rank})" in proc.stderr
    base, one = result.trials
    assert base.step_ms > 100 and base.data_wait_share > 0.3  # rank 1's 60 ms of data
    assert one.step_ms < 0.8 * base.step_ms and one.worker_cpu < 0.5
    # two trials leave no room to repeat the leader: the gain is not claimed
    assert result.decision == "not confirmed" and result.best == 1
    assert "step times: steady mean (elapsed over the steady steps / their count), on " \
           "unprofiled steps; the slowest of 2 ranks" in proc.stdout
    # issue 31: the verdict first, the leader under its own name
    assert proc.stdout.splitlines()[3] == (
        "keep your settings (num_workers=0, pin_memory=false, persistent_workers=false): no "
        "gain was confirmed (the notes say what ran out)")
    assert proc.stdout.splitlines()[4].startswith("leader, not confirmed, not kept: "
                                                  "num_workers=1 measured ")
