"""The tune job on a fake clock (no processes): `bench` supplies the clock (`monotonic`) and
the trials (`run_trial`), so what the job decides follows from the figures fed in, never from
the machine's load. Shared by test_tune_order.py and test_tune_busy.py."""

from __future__ import annotations

import json
import types
from pathlib import Path

from tune_json import assert_one_number

from stallscope.core.jobs import run_job
from stallscope.core.tune import Search, TuneConfig, duels, job

SCRIPT = {"num_workers": 0, "pin_memory": False, "persistent_workers": False,
          "prefetch_factor": None}


def run_on_fake_clock(tmp_path: Path, monkeypatch, bench, budget_s: float):
    """(the job's result, its tune.json) for a script with SCRIPT's settings on 2 cores."""
    clock = types.SimpleNamespace(monotonic=bench.monotonic)
    for module in (job, duels):
        monkeypatch.setattr(module, "time", clock)
        monkeypatch.setattr(module, "run_trial", bench.run_trial)
    monkeypatch.setattr(job, "usable_cores", lambda: 2)

    def start(result, base, launch, cores, most, min_gain):
        result.site, base.settings = "train.py:9", dict(SCRIPT)
        return Search(SCRIPT, cores, False, min_gain, most=most)

    monkeypatch.setattr(job, "_start_search", start)
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    result = run_job(job.tune_job(TuneConfig(script=script, out=tmp_path / "t",
                                             budget_s=budget_s)))
    data = json.loads((tmp_path / "t" / "tune.json").read_text())
    assert_one_number(data)
    return result, data
