"""A data.mdb cut short (an interrupted copy): verify, a resumed convert and LMDBDataset say so
in one line instead of dying of SIGBUS on the first page past the file's end."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest
from image_folders import noise_classes

from stallscope.core.jobs import run_job
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.destination import check_destination
from stallscope.core.lmdb.images import Preprocess

pytestmark = pytest.mark.runner  # the CLI and the reader in child processes (a SIGBUS kills)


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("trunc")
    noise_classes(base / "src", 2, 60, (64, 64), seed=3, name="{i:02d}.png")
    dst = base / "full.lmdb"
    run_job(convert(base / "src", dst, workers=0))
    return base / "src", dst


def cut(pristine: Path, where: Path, size: int) -> Path:
    shutil.copytree(pristine, where)
    os.truncate(where / "data.mdb", size)
    return where


def py(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_the_meta_layout_matches_lmdb_own_figures(converted):
    from stallscope.core.lmdb.handles import needed_length

    _src, dst = converted
    env = lmdb.open(str(dst), readonly=True, lock=False)
    info, psize = env.info(), env.stat()["psize"]
    env.close()
    head = (dst / "data.mdb").read_bytes()[: 2 * psize]
    assert needed_length(head) == ((info["last_pgno"] + 1) * psize, psize)
    assert (dst / "data.mdb").stat().st_size == (info["last_pgno"] + 1) * psize


@pytest.mark.parametrize("keep", [0.5, 4096, 100])
def test_verify_says_truncated_and_exits_1(converted, tmp_path, keep):
    _src, dst = converted
    full = (dst / "data.mdb").stat().st_size
    size = int(full * keep) if isinstance(keep, float) else keep if keep > 1000 else full - keep
    half = cut(dst, tmp_path / "half.lmdb", size)
    for extra in ([], ["--samples", "0", "--json"]):
        done = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "verify", str(half),
                               *extra], capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
        text = json.loads(done.stdout)["problem"] if extra else done.stdout.strip()
        assert "\n" not in text and "Traceback" not in done.stderr
        assert f"{half / 'data.mdb'} is truncated: " in text
        assert f"({size:,} of {full:,} bytes" in text


def test_resumed_convert_refuses_a_truncated_destination(converted, tmp_path):
    src, dst = converted
    half = cut(dst, tmp_path / "half.lmdb", (dst / "data.mdb").stat().st_size // 2)
    done = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "convert", str(src),
                           str(half), "--workers", "0"], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    err = done.stderr.strip()
    assert "\n" not in err and "is truncated: " in err and "data.mdb" in err
    verdict = check_destination(half, str(src), Preprocess())  # the wizard's check
    assert not verdict.ok and "is truncated" in verdict.text


def test_the_dataset_raises_a_clear_error(converted, tmp_path):
    _src, dst = converted
    half = cut(dst, tmp_path / "half.lmdb", (dst / "data.mdb").stat().st_size // 2)
    done = py(
        "from stallscope.core.lmdb.dataset import LMDBDataset\n"
        "from stallscope.core.errors import StallscopeError\n"
        "try:\n"
        f"    d = LMDBDataset({str(half)!r}); d[len(d) - 1]\n"
        "except StallscopeError as exc:\n"
        "    print('refused:', exc)\n"
    )  # fmt: skip
    assert done.returncode != -signal.SIGBUS, "SIGBUS"
    assert done.returncode == 0 and done.stdout.startswith("refused: "), done
    assert "is truncated: " in done.stdout


def test_an_intact_lmdb_still_opens(converted):
    from stallscope.core.lmdb.dataset import LMDBDataset

    _src, dst = converted
    ds = LMDBDataset(dst)
    assert len(ds) == 120 and tuple(ds[119][0].shape) == (3, 64, 64)
    ds.close()
