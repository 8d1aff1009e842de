"""`convert --measure`'s "before" for an image folder is the loop a user writes without
stallscope (ImageFolder + PIL, PILToTensor, default collate), reading the same pixels and
labels as the LMDB; a factory's is its own dataset."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from stallscope.core import cli
from stallscope.core.jobs import run_job
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.measure import PlainImageFolder, before_dataset, measure


def folder(root, n=5):
    rng = np.random.default_rng(7)
    for cls in ("ant", "bee"):
        (root / cls).mkdir(parents=True)
        for i in range(n):
            img = Image.fromarray(rng.integers(0, 256, (18 + i, 22, 3), np.uint8))
            img.convert("L" if i == 2 else "RGB").save(root / cls / f"{i}.png")
    (root / "bee" / "broken.png").write_bytes(b"not a png")
    return root


@pytest.mark.parametrize("pre", [Preprocess(), Preprocess(resize=12, crop=(10, 10))])
def test_the_plain_loop_reads_what_the_lmdb_holds(tmp_path, pre):
    src, dst = folder(tmp_path / "src"), tmp_path / "out.lmdb"
    run_job(convert(str(src), str(dst), preprocess=pre, workers=0))
    lmdb = LMDBDataset(dst)
    try:
        before = before_dataset(dst, lmdb.meta)
        assert isinstance(before, PlainImageFolder) and len(before) == 11  # broken.png listed
        samples = [before[i] for i in range(len(before))]
        assert sum(s is None for s in samples) == 1  # the file the conversion skipped
        read = [s for s in samples if s is not None]
        assert len(read) == len(lmdb) == 10
        for k, (image, label) in enumerate(read):
            stored, stored_label = lmdb[k]
            assert image.shape[0] == 3 and image.dtype == stored.dtype  # PILToTensor: CHW uint8
            assert np.array_equal(image.numpy(), stored.numpy()) and label == stored_label
    finally:
        lmdb.close()


def test_measure_and_the_cli_name_the_plain_loop(tmp_path, capsys):
    src, dst = folder(tmp_path / "src", n=24), tmp_path / "out.lmdb"
    run_job(convert(str(src), str(dst), workers=0))
    t = run_job(measure(dst, num_workers=0, batch_size=8, seconds=0.05, cold=False))
    assert t.before.name == "ImageFolder + PIL" and t.before.samples > 0
    assert cli.main(["convert", str(src), str(tmp_path / "again.lmdb"), "--workers", "0",
                     "--verify", "0", "--measure", "--num-workers", "0"]) == 0  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    head = out.index(next(line for line in out if line.startswith("throughput in samples/s")))
    assert out[head + 1].split() == ["ImageFolder", "+", "PIL", "LMDBDataset", "LMDB", "MB/s"]


@pytest.mark.runner  # measure tries DataLoader workers (child processes)
def test_measure_prints_one_labelled_figure_per_column_and_says_when_samples_are_few(
        tmp_path, capsys):
    """Each row is one page-cache state with a column per dataset (no "A -> B" pairs), each
    num_workers tried is named with its figure, and 24 samples get the caveat."""
    from stallscope.core.commands.convert import print_throughput

    src, dst = folder(tmp_path / "src", n=12), tmp_path / "out.lmdb"
    run_job(convert(str(src), str(dst), workers=0))
    t = run_job(measure(dst, batch_size=6, seconds=0.05))
    print_throughput(t)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"throughput in samples/s, DataLoader(batch_size=6, "
                      f"num_workers={t.num_workers}, shuffled, {t.collate}):")
    rows = {line.split("  ")[1].strip(): line for line in out[2:4]}
    assert set(rows) == {"cold page cache", "warm page cache"}
    for temp, before, after in (("cold page cache", t.before_cold, t.after_cold),
                                ("warm page cache", t.before, t.after)):
        figures = rows[temp].split()[3:6]
        assert figures == [f"{before.samples_per_s:,.0f}", f"{after.samples_per_s:,.0f}",
                           f"{after.mb_per_s:,.1f}"]
    assert not [line for line in out if "->" in line]
    if t.tried_workers:  # more than one core: each setting tried, named with its figure
        tried = next(line for line in out if "was chosen by" in line)
        for w, rate in t.tried_workers.items():
            assert f"num_workers={w}: {rate:,.0f}/s" in tried
    assert out[-1].strip().startswith("caveat: only 24 samples (4 batch(es) of 6): ")
