"""`make gpu-check` (tests/gpu/check.py): skips cleanly without CUDA; its scenarios name real
rules; one scenario runs under the runner on the CPU and is analysed end to end."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from stallscope.core.advice import RULES

pytestmark = pytest.mark.runner  # tests/gpu/check.py and scripts under the runner, in children

CHECK = Path(__file__).resolve().parents[1] / "gpu" / "check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", CHECK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_scenario_names_a_rule_and_exists():
    mod = _module()
    assert set(mod.EXPECTED.values()) <= set(RULES)
    for name in mod.EXPECTED:
        assert (mod.SCENARIOS / name).is_file(), name
    assert mod.RUNNER.is_file()


def test_without_cuda_it_says_skipped_and_exits_0():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: make gpu-check runs the scenarios")
    out = subprocess.run([sys.executable, str(CHECK)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0
    assert out.stdout.startswith("no CUDA device: skipped")


@pytest.mark.slow
def test_dataloader_scenario_on_the_cpu(tmp_path):
    pytest.importorskip("torch")
    mod = _module()
    ids, note = mod.run_scenario(mod.SCENARIOS / "dataloader.py", "cpu", tmp_path)
    assert note == "4 steps, no GPU activity", (note, ids)
    assert "dataloader_bound" in ids, (note, ids)  # 16 items x 2 ms of sleep per step
