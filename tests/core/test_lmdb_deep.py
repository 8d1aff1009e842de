"""Images of more than 8 bits per channel: --keep-mode stores them as uint16 and the header and
metadata say so; without it they become 8-bit RGB as ImageFolder reads them (values above 255
clipped), and convert says so in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stallscope.core import cli
from stallscope.core.lmdb.dataset import LMDBDataset

pytestmark = pytest.mark.runner  # --workers 2: the decoding pool


def deep_png(path: Path) -> np.ndarray:
    values = (np.arange(64, dtype=np.uint16).reshape(8, 8) * 1000).astype(np.uint16)
    Image.fromarray(values).save(path)  # a 16-bit greyscale PNG (mode I;16)
    with Image.open(path) as img:
        assert img.mode == "I;16"
    return values


def tree(root: Path, rgb: int = 3) -> tuple[Path, np.ndarray]:
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    for i in range(rgb):
        Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)).save(root / "a" / f"{i}.png")
    return root, deep_png(root / "b" / "deep.png")


def convert(capsys, src: Path, dst: Path, *extra: str) -> str:
    assert cli.main(["convert", str(src), str(dst), "--workers", "0", "--verify", "0",
                     *extra]) == 0  # fmt: skip
    return capsys.readouterr().out


def test_keep_mode_says_the_uint16_it_stores(tmp_path, capsys):
    src, values = tree(tmp_path / "src")
    out = convert(capsys, src, tmp_path / "k.lmdb", "--keep-mode")
    assert "  image: uint8/uint16 (shape per sample)" in out
    ds = LMDBDataset(tmp_path / "k.lmdb")
    assert ds.meta["stored"][0]["dtype"] == "uint8/uint16"
    image, label = ds[len(ds) - 1]
    assert int(label) == 1 and str(image.dtype) == "torch.uint16"
    assert np.array_equal(image.numpy()[0], values)
    assert "more than 8 bits" not in out  # nothing was clipped
    ds.close()


def test_keep_mode_of_deep_images_only_says_uint16(tmp_path, capsys):
    root = tmp_path / "src" / "x"
    root.mkdir(parents=True)
    for i in range(3):
        deep_png(root / f"{i}.png")
    out = convert(capsys, tmp_path / "src", tmp_path / "d.lmdb", "--keep-mode")
    assert "  image: uint16 1x8x8" in out
    assert LMDBDataset(tmp_path / "d.lmdb").meta["stored"][0]["dtype"] == "uint16"


@pytest.mark.parametrize("workers", ["0", "2"])
def test_rgb_conversion_of_a_deep_image_is_said_in_one_line(tmp_path, capsys, workers):
    src, values = tree(tmp_path / "src")
    dst = tmp_path / "r.lmdb"
    out = convert(capsys, src, dst, "--workers", workers)
    lines = [line for line in out.splitlines() if "more than 8 bits" in line]
    assert lines == [
        "  warning: 1 image(s) of more than 8 bits per channel (I;16: 1, e.g. b/deep.png) were "
        "converted to 8-bit RGB as PIL's convert(\"RGB\") and torchvision's ImageFolder do: "
        "every value above 255 became 255; --keep-mode stores them as uint16"
    ]
    assert "  image: uint8 3x8x8" in out
    ds = LMDBDataset(dst)
    with Image.open(src / "b" / "deep.png") as img:  # what ImageFolder would give
        expected = np.asarray(img.convert("RGB")).transpose(2, 0, 1)
    assert np.array_equal(ds[len(ds) - 1][0].numpy(), expected)
    assert ds.meta["narrowed"] == [{"mode": "I;16", "count": 1, "example": "b/deep.png"}]
    ds.close()
