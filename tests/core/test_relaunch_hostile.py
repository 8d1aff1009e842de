"""The relaunch of a script's own ranks reaches only ranks (issue 29): a Python the script starts
for anything else (a tool, a self re-run with rank variables but no distributed job) sees the
user's environment, without stallscope's PYTHONPATH entry or STALLSCOPE_RELAUNCH, and is not
profiled as a rank. (Real ranks: tests/core/test_frameworks.py, Lightning DDP and mp.spawn.)"""

from __future__ import annotations

import json

import pytest
from runner_helpers import finished, run, write_script

pytestmark = pytest.mark.runner

SCRIPT = """
import json, os, subprocess, sys

REPORT = ("import json, os, sys; print('ENV ' + json.dumps({'who': sys.argv[-1], "
          "'pythonpath': os.environ.get('PYTHONPATH'), "
          "'relaunch': os.environ.get('STALLSCOPE_RELAUNCH'), "
          "'sys_path': [p for p in sys.path if p.rstrip('/').endswith('relaunch')]}), flush=True)")

if os.environ.get("SELF_RERUN") == "1":
    exec(REPORT.replace("sys.argv[-1]", "'self re-run'"))
    sys.exit(0)

os.environ["USER_VAR"] = "kept"
# a self re-run with rank variables and no distributed job (no MASTER_ADDR / MASTER_PORT)
subprocess.run([sys.executable, __file__], check=True,
               env={**os.environ, "SELF_RERUN": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
subprocess.run([sys.executable, "-c", REPORT, "tool"], check=True)
# a Python started by a Python the script started: the grandchild sees what the user set
subprocess.run([sys.executable, "-c",
                "import subprocess, sys; subprocess.run([sys.executable, '-c', sys.argv[1], "
                "'grandchild'], check=True)", REPORT], check=True)
print("PARENT done", flush=True)
"""


def test_only_ranks_see_the_relaunch(tmp_path):
    proc, session = run(tmp_path, write_script(tmp_path, SCRIPT), "--wait", "0",
                        "--warmup", "0")
    assert proc.returncode == 0, proc.stderr
    seen = {}
    for line in proc.stdout.splitlines():
        if line.startswith("ENV "):
            report = json.loads(line[4:])
            seen[report.pop("who")] = report
    assert sorted(seen) == ["grandchild", "self re-run", "tool"], proc.stdout
    for who, report in seen.items():
        assert report == {"pythonpath": None, "relaunch": None, "sys_path": []}, (who, report)
    assert not list(session.glob("events.rank*.jsonl"))  # the self re-run was no rank
    assert finished(session)["rc"] == 0
    assert "PARENT done" in proc.stdout
