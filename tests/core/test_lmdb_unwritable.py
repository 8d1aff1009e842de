"""A destination that cannot be written is said as such before its free space is looked at:
a read-only disk (or /proc) is not a "disk full", and a full disk's figures carry their unit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stallscope.core.errors import StallscopeError
from stallscope.core.lmdb.destination import require_space

pytestmark = pytest.mark.runner  # the CLI in a child process


def cli(*args) -> str:
    done = subprocess.run([sys.executable, "-m", "stallscope.core.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    err = done.stderr.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def source(root: Path, n: int = 40) -> Path:
    rng = np.random.default_rng(8)
    (root / "a").mkdir(parents=True)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (96, 96, 3), np.uint8)).save(root / "a" / f"{i}.png")
    return root


def test_a_read_only_disk_too_small_anyway_is_not_called_full(tmp_path):
    src = source(tmp_path / "src")  # ~1.1 MiB to store: more than the 1 MiB disk
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "none", str(mnt)],
                      capture_output=True).returncode != 0:  # fmt: skip
        pytest.skip("cannot mount a tmpfs here")
    try:
        err = cli("convert", src, mnt / "x.lmdb", "--workers", "0")
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
    assert f"{mnt / 'x.lmdb'}: cannot write there ([Errno 30] Read-only file system)" in err
    assert "disk full" not in err


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs /proc")
def test_a_file_system_that_takes_no_folders_is_not_called_full(tmp_path):
    err = cli("convert", source(tmp_path / "src", n=2), "/proc/x.lmdb", "--workers", "0")
    assert err.startswith("stallscope: error: /proc/x.lmdb: cannot write there (")
    assert "disk full" not in err


def test_a_full_disk_says_mib_for_both_figures(tmp_path):
    with pytest.raises(StallscopeError, match=r"disk full, [\d,.]+ MiB needed, [\d,.]+ MiB free$"):
        require_space(tmp_path / "x.lmdb", 1 << 60)
