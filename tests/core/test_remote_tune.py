"""`tune --host` and `check --host` through a real sshd on 127.0.0.1 (tests/sshd.py): trials
run there one at a time and state what a local tune states."""

from __future__ import annotations

import pytest
from runner_helpers import write_script
from scripts import training

from stallscope.core import cli
from stallscope.core.tune import load_result

pytestmark = pytest.mark.runner

# I/O bound: each item waits 6 ms (a sleep, like a read), a step computes 10 ms
IO_BOUND = training(items=2000, item_s=0.006, dim=4, forever=True, step_s=0.01)


def test_tune_on_a_host_agrees_with_a_local_tune(host, tmp_path, capfd):
    script = write_script(tmp_path, IO_BOUND, "train.py")
    common = ["--max-trials", "2", "--max-workers", "2", "--budget", "150"]
    results = []
    for name, extra in (("local", []), ("remote", host)):
        rc = cli.main(["tune", *common, *extra, "--out", str(tmp_path / name), "--",
                       str(script)])
        err = capfd.readouterr().err
        assert rc == 0, err
        results.append(load_result(tmp_path / name))
    local, remote = results
    assert [t.changes for t in remote.trials] == [t.changes for t in local.trials]
    assert all(t.ok and t.steady_reached for t in local.trials + remote.trials)
    for here, there in zip(local.trials, remote.trials, strict=True):
        assert there.step_ms == pytest.approx(here.step_ms, rel=0.35), (here.label, there.label)
    # a worker hides the 48 ms a batch waits behind the step on both (~0.83 of the step)
    gains = [r.trials[1].step_ms / r.trials[0].step_ms for r in (local, remote)]
    assert all(g < 0.95 for g in gains) and gains[1] == pytest.approx(gains[0], abs=0.15)
    assert remote.trials[0].peak_rss is None and local.trials[0].peak_rss  # not sampled there


def test_check_on_a_host(host, tmp_path, capfd):
    script = write_script(tmp_path, training(items=96, item_s=0.004, step_s=0.02), "train.py")
    rc = cli.main(["check", *host, "--max-data-wait", "5%", "--", str(script)])
    out = capfd.readouterr().out.splitlines()
    assert rc == 1 and out[0].startswith("FAIL data wait ")
    rc = cli.main(["check", *host, "--max-data-wait", "95%", "--", str(script)])
    assert rc == 0, capfd.readouterr()
