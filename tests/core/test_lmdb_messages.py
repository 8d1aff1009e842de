"""Smaller things said right: a class folder reached first through a link inside another class
keeps its own label (as ImageFolder gives it), a file gone before it was decoded is skipped with
a whole reason, and a folder without data.mdb is said as such."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stallscope.core.errors import StallscopeError
from stallscope.core.jobs import run_job
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.folder import scan_folder_job


def png(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(path)


def test_the_real_class_folder_wins_over_a_link_into_it(tmp_path):
    root = tmp_path / "src"
    png(root / "a" / "1.png", 10)
    png(root / "b" / "3.png", 20)
    png(root / "b" / "4.png", 30)
    os.symlink("../b", root / "a" / "linkb")  # walked (under a) before b itself
    dst = tmp_path / "s.lmdb"
    result = run_job(convert(root, dst, workers=0))
    ds = LMDBDataset(dst)
    labels = Counter(int(ds[i][1]) for i in range(len(ds)))
    assert ds.classes == ["a", "b"] and labels == {0: 1, 1: 2}
    ds.close()
    assert result.scan_skipped == [{"path": "a/linkb", "reason": "a link to the class folder b, "
                                    "whose files are listed as that class"}]  # fmt: skip


def test_a_second_top_level_link_to_a_class_is_still_listed_once(tmp_path):
    root = tmp_path / "src"
    png(root / "b" / "1.png", 10)
    os.symlink("b", root / "c")  # top level: b comes first, c is a second name for it
    source = run_job(scan_folder_job(root))
    assert source.files == ["b/1.png"] and [s["path"] for s in source.scan_skipped] == ["c"]


def test_a_file_gone_before_decoding_is_skipped_with_a_whole_reason(tmp_path):
    root = tmp_path / "src"
    for i in range(4):
        png(root / "a" / f"{i}.png", i)
    source = run_job(scan_folder_job(root))
    (root / "a" / "2.png").unlink()  # after the scan, before the conversion
    result = run_job(convert(source, tmp_path / "g.lmdb", workers=0))
    assert [(s["path"], s["reason"]) for s in result.skipped] == [
        ("a/2.png", "FileNotFoundError: [Errno 2] No such file or directory")
    ]


def test_a_folder_without_data_mdb_is_named(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(StallscopeError, match=r"empty: not an LMDB \(no data.mdb in .*empty\)$"):
        LMDBDataset(tmp_path / "empty")
    (tmp_path / "zero").mkdir()
    (tmp_path / "zero" / "data.mdb").write_bytes(b"")
    with pytest.raises(StallscopeError, match=r"data.mdb: not an LMDB \(an empty file\)$"):
        LMDBDataset(tmp_path / "zero")
