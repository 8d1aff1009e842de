"""Without ../shared/fixtures/traces a plain clone skips the real-trace tests and says so; under
CI=true they fail. Run in a child pytest with STALLSCOPE_FIXTURES pointing elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.runner  # pytest in a child process

TESTS = Path(__file__).resolve().parents[1]

PROBE = '''
from fixture_traces import fixture_path


def test_needs_a_real_trace():
    assert fixture_path("kineto_nw0").exists()
'''


def run_probe(tmp_path: Path, fixtures: Path, ci: str | None) -> subprocess.CompletedProcess:
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["STALLSCOPE_FIXTURES"] = str(fixtures)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-q",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(probe)],
        env=env | {"PYTHONPATH": str(TESTS)}, capture_output=True, text=True, timeout=120,
        cwd=tmp_path)  # fmt: skip


def test_a_plain_clone_skips_and_says_where_the_traces_were_looked_for(tmp_path):
    absent = tmp_path / "no-traces"
    out = run_probe(tmp_path, absent, None)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 skipped" in out.stdout
    assert f"real traces not found at {absent}" in out.stdout


def test_ci_fails_when_the_traces_are_absent(tmp_path):
    absent = tmp_path / "no-traces"
    for ci in ("true", "1"):
        out = run_probe(tmp_path, absent, ci)
        assert out.returncode == 1, out.stdout + out.stderr
        assert "1 failed" in out.stdout and "CI=true needs the real traces" in out.stdout


def test_ci_fails_when_one_trace_is_missing_and_passes_when_it_is_there(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    out = run_probe(tmp_path, folder, "true")
    assert out.returncode == 1 and "real trace kineto_nw0* not found" in out.stdout
    (folder / "kineto_nw0.pt.trace.json").write_text("{}")
    out = run_probe(tmp_path, folder, "true")
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout + out.stderr
