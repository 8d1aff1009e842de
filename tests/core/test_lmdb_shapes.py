"""The shapes a conversion reports come from every image it decoded, not from a survey of 48 or
64 of them: one odd-sized file anywhere gets the warning, the header says "shape per sample",
and the printed snippet reads lists (it runs as pasted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stallscope.core import cli
from stallscope.core.errors import Cancelled
from stallscope.core.jobs import CancelFlag, run_job
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.destination import destination_state

pytestmark = pytest.mark.runner  # the printed snippet runs in a child process


def folder(root: Path, n: int = 100, odd: str | None = "c1/3zz.png") -> Path:
    rng = np.random.default_rng(5)
    for c in range(2):
        (root / f"c{c}").mkdir(parents=True, exist_ok=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 256, (12, 12, 3), np.uint8)).save(
                root / f"c{c}" / f"{i}.png")
    if odd:
        Image.fromarray(np.full((12, 13, 3), 7, np.uint8)).save(root / odd)
    return root


def odd_index(dst: Path) -> int:
    ds = LMDBDataset(dst)
    odd = [i for i in range(len(ds)) if tuple(ds[i][0].shape) != (3, 12, 12)]
    ds.close()
    assert len(odd) == 1
    return odd[0]


def not_surveyed(index: int, n: int) -> bool:
    """Neither the 48 headers surveyed before converting nor 64 records afterwards hit it."""
    return all(index not in set(np.linspace(0, n - 1, num=min(k, n)).astype(int).tolist())
               for k in (48, 64))  # fmt: skip


def test_one_odd_image_is_warned_about_and_the_snippet_runs_as_pasted(tmp_path, capsys):
    root = folder(tmp_path / "src")
    dst = tmp_path / "o.lmdb"
    assert cli.main(["convert", str(root), str(dst), "--workers", "0", "--verify", "0",
                     "--snippet"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert not_surveyed(odd_index(dst), 201)  # a survey would have missed it
    assert "  image: uint8 (shape per sample)" in out and "uint8 3x12x12" not in out
    assert ("warning: image has 2 sizes in 201 samples (3x12x12: 200; 3x12x13: 1 (c1/3zz.png))"
            in out)  # fmt: skip
    snippet = out.split("use it in your training script:\n\n")[1]
    assert "collate_fn=list" in snippet and "for batch in loader:" in snippet
    done = subprocess.run([sys.executable, "-W", "error", "-c", snippet], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    meta = LMDBDataset(dst).meta
    assert meta["survey"]["exact"] is True and meta["survey"]["varied"] is True
    assert meta["stored"][0]["shape"] is None and meta["stored"][1]["shape"] == []


def test_uniform_images_say_every_sample_and_stack(tmp_path, capsys):
    root = folder(tmp_path / "src", n=40, odd=None)
    dst = tmp_path / "u.lmdb"
    assert cli.main(["convert", str(root), str(dst), "--workers", "2", "--verify", "0",
                     "--snippet"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "  image: uint8 3x12x12" in out and "image: 3x12x12 in all 80 samples" in out
    assert "collate_fn" not in out and "for images, labels in loader:" in out


def test_a_resumed_conversion_counts_the_shapes_of_both_runs(tmp_path):
    root = folder(tmp_path / "src", n=150, odd="c1/99zz.png")
    dst = tmp_path / "r.lmdb"
    cancel = CancelFlag()
    job = convert(root, dst, workers=0, chunk=8, commit_every=40, cancel=cancel)
    for _ in range(12):
        next(job)
    cancel.set()
    with pytest.raises(Cancelled):
        while True:
            next(job)
    progress = destination_state(dst).progress
    assert 0 < progress["written"] < 301 and progress["layouts"]
    result = run_job(convert(root, dst, workers=0))
    assert result.resumed_from == progress["next_source"]
    assert result.survey["shapes"] == [["3x12x12", 300], ["3x12x13", 1]]
    assert result.survey["examples"]["3x12x13"] == "c1/99zz.png"
