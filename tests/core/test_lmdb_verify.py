"""`verify` and `stallscope-cli verify`: a byte changed anywhere in any chunk is found without
the source; each run compares other random samples (seed printed, --seed repeats)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import lmdb
import numpy as np
import pytest
from PIL import Image

from stallscope.core import cli
from stallscope.core.jobs import run_job
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.verify import check_records, verify

sys.path.insert(0, str(Path(__file__).parent))
from test_lmdb_convert import flip_pixel  # noqa: E402  (tests/core is not a package)

pytestmark = pytest.mark.runner  # the CLI in a child process


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("verify")
    rng = np.random.default_rng(2)
    for c in range(2):
        (base / "src" / f"c{c}").mkdir(parents=True)
        for i in range(150):
            size = (30, 28) if i % 2 else (31, 31)  # two record layouts, ~50 per chunk
            Image.fromarray(rng.integers(0, 256, (*size, 3), np.uint8)).save(
                base / "src" / f"c{c}" / f"{i:03d}.png")
    dst = base / "v.lmdb"
    run_job(convert(base / "src", dst, workers=0))
    return base / "src", dst


def chunk_values(dst: Path) -> dict[bytes, bytes]:
    env = lmdb.open(str(dst), readonly=True, lock=False)
    with env.begin() as txn:
        values = {bytes(k): bytes(v) for k, v in txn.cursor() if not k.startswith(b"!")}
    env.close()
    return values


def test_a_byte_changed_anywhere_in_a_chunk_is_found_without_the_source(converted, tmp_path):
    _src, pristine = converted
    dst = tmp_path / "copy.lmdb"
    shutil.copytree(pristine, dst)
    values = chunk_values(dst)
    assert len(values) >= 2  # 300 samples over several chunks
    rng = np.random.default_rng(11)
    env = lmdb.open(str(dst))
    missed = []
    for _trial in range(300):
        key = list(values)[rng.integers(len(values))]
        raw = bytearray(values[key])
        pos = int(rng.integers(len(raw)))
        raw[pos] ^= 1 << int(rng.integers(8))
        with env.begin(write=True) as txn:
            txn.put(key, bytes(raw))
        env.close()
        result = run_job(check_records(dst))
        if not result.damaged:
            missed.append((key, pos))
        env = lmdb.open(str(dst))
        with env.begin(write=True) as txn:
            txn.put(key, values[key])
    env.close()
    assert not missed, f"flips not found: {missed[:5]}"
    assert run_job(check_records(dst)).ok


def test_cli_verify_lists_damage_with_the_source_gone(converted, tmp_path):
    src, pristine = converted
    copy = tmp_path / "data"
    shutil.copytree(src, copy / "src")
    dst = copy / "v.lmdb"
    run_job(convert(copy / "src", dst, workers=0))
    shutil.rmtree(copy / "src")
    flip_pixel(dst, 123)
    flip_pixel(dst, 299)
    done = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "verify", str(dst)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "2 damaged record(s) of 300" in done.stdout
    assert "sample 123: crc32 mismatch" in done.stdout and "sample 299: crc32" in done.stdout
    assert "source not compared: the source cannot be opened" in done.stdout
    assert cli.main(["verify", str(pristine), "--json", "--samples", "0"]) == 0


def test_each_run_compares_other_samples_and_the_seed_repeats_one(converted, capsys):
    _src, dst = converted
    runs = [run_job(verify(dst, n=20)) for _ in range(3)]
    assert all(r.ok and r.checked == 20 for r in runs)
    assert len({r.seed for r in runs}) == 3
    assert len({tuple(r.samples) for r in runs}) == 3  # other samples each run
    again = run_job(verify(dst, n=20, seed=runs[0].seed))
    assert again.samples == runs[0].samples
    assert cli.main(["verify", str(dst), "--seed", "5", "--samples", "7", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seed"] == 5 and out["checked"] == 7 and out["records_checked"] == 300
    assert cli.main(["verify", str(dst), "--samples", "4"]) == 0
    text = capsys.readouterr().out
    assert "all 300 records match their crc32; 4 random samples identical" in text
    assert "(--seed " in text and "checks the same samples again)" in text


def test_a_big_lmdb_checks_the_sampled_records_after_converting(converted, tmp_path, monkeypatch):
    from stallscope.core.lmdb import verify as verify_mod

    _src, pristine = converted
    dst = tmp_path / "big.lmdb"
    shutil.copytree(pristine, dst)
    monkeypatch.setattr(verify_mod, "ALL_RECORDS_BYTES", 0)  # as if it were 24 GB
    quick = run_job(verify(dst, n=10, seed=3))
    assert quick.ok and quick.records_checked == 0 and not quick.all_records
    assert "the sampled records match their crc32 (stallscope-cli verify DST" in quick.summary()
    flip_pixel(dst, quick.samples[4])
    again = run_job(verify(dst, n=10, seed=3))  # the same samples: the flipped one is among them
    assert not again.ok and len(again.mismatches) == 1
    assert f"sample {quick.samples[4]}" in again.mismatches[0] and "crc32" in again.mismatches[0]
    full = run_job(check_records(dst))  # stallscope-cli verify: every record, whatever the size
    assert full.records_checked == 300 and len(full.damaged) == 1
