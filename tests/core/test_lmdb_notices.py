"""What `convert` says beyond its figures: a crop larger than the images (once, with the count
and the sizes), images beside the class folders (how many, why), and source files changed
between a conversion and its resume (which, and what became of them)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from image_folders import noise_classes
from PIL import Image

from stallscope.core import cli
from stallscope.core.errors import Cancelled
from stallscope.core.jobs import CancelFlag, run_job
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.destination import destination_state
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.notices import notices
from stallscope.core.lmdb.verify import verify

pytestmark = pytest.mark.runner  # decoding workers in child processes


def _mixed(root: Path) -> Path:
    """c0: four 20x16 PNGs; c1: three 40x30 JPEGs and one 10x12 grayscale PNG (h x w)."""
    noise_classes(root, 1, 4, (16, 20), seed=1)
    (root / "c1").mkdir()
    rng = np.random.default_rng(2)
    for i in range(3):
        Image.fromarray(rng.integers(0, 256, (30, 40, 3), np.uint8)).save(root / "c1" / f"{i}.jpg")
    Image.fromarray(rng.integers(0, 256, (12, 10), np.uint8)).save(root / "c1" / "gray.png")
    return root


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_crop_larger_than_images_is_said_once_with_their_count_and_sizes(tmp_path, capsys,
                                                                           workers):
    root = _mixed(tmp_path / "src")
    dst = tmp_path / "crop.lmdb"
    assert cli.main(["convert", str(root), str(dst), "--crop", "24x16", "--workers", workers,
                     "--verify", "0"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    said = [line.strip() for line in out.splitlines() if "larger than" in line]
    assert said == [
        "warning: --crop 24x16 is larger than 5 image(s) (20x16: 4, e.g. c0/000.png; 10x12: 1, "
        "e.g. c1/gray.png): the crop padded them with black; --resize to at least the crop "
        "size, or a smaller --crop, keeps only real pixels"]
    ds = LMDBDataset(dst)
    try:
        image, _label = ds[0]
        assert int(image[:, :, :2].sum()) == 0  # 2 black columns each side of a 20-wide image
    finally:
        ds.close()


def test_a_crop_that_fits_says_nothing(tmp_path, capsys):
    root = _mixed(tmp_path / "src")
    assert cli.main(["convert", str(root), str(tmp_path / "fits.lmdb"), "--resize", "24",
                     "--crop", "24", "--verify", "0"]) == 0  # fmt: skip
    assert "larger than" not in capsys.readouterr().out


def test_images_beside_the_class_folders_are_counted_and_explained(tmp_path, capsys):
    root = noise_classes(tmp_path / "src", 2, 2, (8, 8), seed=3)
    for name in ("cover.png", "extra.jpg"):
        Image.new("RGB", (8, 8)).save(root / name)
    assert cli.main(["convert", str(root), str(tmp_path / "top.lmdb"), "--verify", "0"]) == 0
    out = capsys.readouterr().out
    assert ("note: 2 image(s) beside the class folders (e.g. cover.png) are not converted: with "
            "class subfolders, only the images inside them are samples (ImageFolder's layout); "
            "move them into a class folder to include them") in out


def test_class_folders_without_images_are_named_with_their_labels(tmp_path, capsys):
    """ImageFolder's classes are every subfolder; one holding no image (an empty one, one of
    notes only) is a label without samples: convert and the wizard's source page say so."""
    from stallscope.core.lmdb.inspection import inspect_source

    root = noise_classes(tmp_path / "src", 2, 2, (8, 8), seed=3)
    (root / "b_empty").mkdir()
    (root / "z_notes").mkdir()
    (root / "z_notes" / "readme.txt").write_text("not an image")
    assert cli.main(["convert", str(root), str(tmp_path / "e.lmdb"), "--verify", "0"]) == 0
    said = ("2 class folder(s) hold no image: b_empty (0), z_notes (3); their labels (in "
            "brackets) have no samples (torchvision's ImageFolder refuses such a folder); "
            "remove those folders or put images in them")
    assert f"warning: {said}" in capsys.readouterr().out
    assert said in inspect_source(str(root)).notes
    ds = LMDBDataset(tmp_path / "e.lmdb")
    try:
        assert sorted({int(ds[k][1]) for k in range(len(ds))}) == [1, 2]  # c0, c1
    finally:
        ds.close()


def _rewrite(path: Path, size: tuple[int, int], seed: int) -> None:
    """A new image at the same path, another size (so another byte count) and a later mtime."""
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (*size, 3), np.uint8)).save(path)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


@pytest.mark.parametrize("workers", [0, 2])
def test_a_file_changed_before_the_resume_takes_it_in_is_named_and_converted_as_it_is_now(
        tmp_path, workers):
    root = noise_classes(tmp_path / "src", 2, 6, (8, 8), seed=4)
    dst = tmp_path / "resumed.lmdb"
    cancel = CancelFlag()
    job = convert(root, dst, workers=0, chunk=2, commit_every=1000, cancel=cancel)
    next(job)
    next(job)
    cancel.set()
    with pytest.raises(Cancelled):
        while True:
            next(job)
    start = destination_state(dst).progress["next_source"]
    assert 0 < start < 11  # c0/000.png converted, c1/005.png (the last) not yet
    _rewrite(root / "c0" / "000.png", (9, 9), seed=5)  # verify's to find: the LMDB holds it
    _rewrite(root / "c1" / "005.png", (7, 7), seed=6)
    result = run_job(convert(root, dst, workers=workers))
    assert result.resumed_from == start
    (changed,) = result.changed
    size = (root / "c1" / "005.png").stat().st_size
    assert changed["path"] == "c1/005.png"
    assert changed["reason"].startswith(f"is {size:,} bytes now, ")
    assert notices(result) == [
        f"note: 1 source file(s) changed since the scan listed them (c1/005.png "
        f"{changed['reason']}): converted as they are now"]
    ds = LMDBDataset(dst)
    try:
        assert tuple(ds[11][0].shape) == (3, 7, 7)  # taken in as it is now
        assert tuple(ds[0][0].shape) == (3, 8, 8)  # converted before it changed: as it was
    finally:
        ds.close()
    # the listing took c1/005.png as converted: verify finds only the file the LMDB holds old
    check = run_job(verify(dst, n=12, seed=0))
    assert [m.split(":")[0] for m in check.mismatches] == ["sample 0 (c0/000.png)"]
    again = run_job(convert(root, dst, workers=0))  # not refused as another source
    assert again.already_complete and again.count == 12


SCANS = """
import numpy as np
from PIL import Image


class Scans:
    def __len__(self):
        return 6

    def __getitem__(self, i):
        deep = Image.fromarray(np.full((10, 12), 1000 * i, np.uint16))
        return {"scan": deep, "label": i % 2}


def make():
    return Scans()
"""


@pytest.mark.parametrize("workers", [0, 2])
def test_a_factorys_pil_images_get_the_same_warnings_as_a_folders(tmp_path, workers):
    (tmp_path / "scans.py").write_text(SCANS)
    result = run_job(convert(f"{tmp_path / 'scans.py'}:make", tmp_path / "s.lmdb",
                             workers=workers, preprocess=Preprocess(crop=(16, 16))))
    assert result.narrowed == [{"mode": "I;16", "count": 6, "example": "scans.py:make[0]"}]
    assert result.padded == [{"size": "12x10", "count": 6, "example": "scans.py:make[0]"}]
    said = notices(result)
    assert said[0].startswith("warning: 6 image(s) of more than 8 bits per channel (I;16: 6, "
                              "e.g. scans.py:make[0])")
    assert said[1].startswith("warning: --crop 16x16 is larger than 6 image(s) (12x10: 6, "
                              "e.g. scans.py:make[0]): the crop padded them with black")


def test_keep_mode_with_grayscale_beside_rgb_is_told_to_convert_to_rgb_not_to_resize(
        tmp_path, capsys):
    """Under --keep-mode a grayscale file beside RGB ones of the same size stores 1 channel
    against 3: resizing cannot make them stack, converting to RGB does."""
    root = noise_classes(tmp_path / "src", 2, 3, (16, 16), seed=9)
    Image.open(root / "c1" / "000.png").convert("L").save(root / "c1" / "000.png")
    assert cli.main(["convert", str(root), str(tmp_path / "k.lmdb"), "--keep-mode",
                     "--verify", "0", "--workers", "0"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert ("warning: image has 2 sizes in 6 samples (3x16x16: 5; 1x16x16: 1 (c1/000.png)); a "
            "DataLoader cannot stack them into batches: convert with every image as RGB (no "
            "--keep-mode), or read with collate_fn=list") in out
    assert "--resize" not in out
