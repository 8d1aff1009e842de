"""The small image folder the LMDB wizard's tests convert (its own test and the reference
images): two classes of smooth colour images, one corrupt file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def flower_folder(root: Path, varied: bool = True) -> list[Path]:
    """daisy/ and tulip/, six 64x48 images each, plus tulip/broken.png (not an image); the image
    paths. varied: every second image resized to 40x56 and every third a JPEG (two sizes, two
    formats); else all the same size, all PNG (pixels that do not depend on a JPEG encoder)."""
    files = []
    yy, xx = np.mgrid[0:48, 0:64] / 48.0
    for label, cls in enumerate(("daisy", "tulip")):
        (root / cls).mkdir(parents=True)
        for i in range(6):
            r = (np.sin(xx * (i + 1) + label * 2) * 100 + 128).astype(np.uint8)
            g = (yy * 200 + 30 * i).clip(0, 255).astype(np.uint8)
            b = np.full_like(r, 60 + 100 * label)
            img = Image.fromarray(np.stack([r, g, b], -1))
            if varied and i % 2:
                img = img.resize((40, 56))
            path = root / cls / f"{cls}_{i}.{'jpg' if varied and i % 3 == 0 else 'png'}"
            img.save(path)
            files.append(path)
    (root / "tulip" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    return files


def noise_classes(root: Path, classes: int, per_class: int, size: tuple[int, int],
                  seed: int, name: str = "{i:03d}.png") -> Path:
    """root/c0, c1, ...: `per_class` PNGs of random pixels (`size` is height, width) each, the
    same for a seed; returns root."""
    rng = np.random.default_rng(seed)
    for c in range(classes):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(per_class):
            Image.fromarray(rng.integers(0, 256, (*size, 3), np.uint8)).save(
                root / f"c{c}" / name.format(i=i))
    return root

