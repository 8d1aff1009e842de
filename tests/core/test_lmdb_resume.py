"""What `convert` says when it stops and when it resumes: Ctrl-C names the samples kept and
the way on; a source file changed before the resume is named."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stallscope.core.lmdb.destination import destination_state

sys.path.insert(0, str(Path(__file__).parent))
from test_lmdb_convert import _progress, check_factory_lmdb, write_factory  # noqa: E402

pytestmark = pytest.mark.runner  # the CLI in a child process


@pytest.mark.parametrize("sig, how", [(signal.SIGINT, "interrupted"),
                                      (signal.SIGTERM, "ended by SIGTERM")])
def test_ctrl_c_says_how_many_samples_are_kept_and_that_the_same_command_resumes(tmp_path, sig,
                                                                                how):
    n = 40
    spec, files = write_factory(tmp_path / "slow", n, 0.03)
    dst = tmp_path / "stopped.lmdb"
    cmd = [sys.executable, "-m", "stallscope.core.cli", "convert", spec, str(dst),
           "--workers", "0", "--commit-every", "3", "--verify", "0"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while _progress(dst).get("written", 0) < 6:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "no progress committed"
        time.sleep(0.01)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    state = destination_state(dst)
    kept = state.progress["written"]
    assert not state.complete and 0 < kept < n - 1
    assert err.strip().splitlines()[-1] == (
        f"stallscope: {how}: {kept:,} of {n} samples are kept in {dst}; run the same "
        "command again to resume from there")
    assert "Traceback" not in err
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    start = state.progress["next_source"]
    # the whole LMDB's count, this run's figures: not "wrote 39 samples ... 31 samples/s"
    assert done.stdout.splitlines()[0].startswith(f"wrote {n - 1} samples to {dst} (")
    assert f"; resumed at {start}: {n - start} source samples converted in " in done.stdout
    check_factory_lmdb(dst, files)
