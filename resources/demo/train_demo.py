"""stallscope demo: a small CNN trained on JPEG images decoded with PIL in __getitem__.

It is data-loading bound on purpose, the way many real pipelines are: every batch decodes and
resizes full-size JPEGs in the training process (num_workers=0) while the model itself is tiny.

    python train_demo.py                      # plain run, a few seconds
    stallscope-cli run -- train_demo.py       # the same under the profiler
    stallscope-cli tune -- train_demo.py      # find its best DataLoader settings

The JPEGs are generated once per size into a cache folder (see --data), so repeated runs (and
every trial of a tune) spend their time training, not drawing pictures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset

CLASSES = 4


def make_images(folder: Path, count: int, size: int, seed: int = 0) -> list[Path]:
    """JPEGs of noisy stripes; the stripes' angle is the class."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    paths = []
    for i in range(count):
        label = i % CLASSES
        angle = label * np.pi / CLASSES
        wave = np.sin((xx * np.cos(angle) + yy * np.sin(angle)) * 0.2 + rng.uniform(0, 6.3))
        pixels = 127 + 70 * wave[..., None] + rng.normal(0, 25, (size, size, 3))
        path = folder / f"{i:05d}_{label}.jpg"
        Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(path, quality=92)
        paths.append(path)
    return paths


def cached_images(count: int, size: int, root: Path | None = None) -> tuple[list[Path], bool]:
    """(the JPEGs, whether they were made now): made once per (count, size) in `root`
    (default: <tmp>/stallscope-demo-cache), into a temporary folder renamed into place, so
    runs that start together never see half a set."""
    root = Path(root) if root else Path(tempfile.gettempdir()) / "stallscope-demo-cache"
    folder = root / f"{count}x{size}-v1"
    paths = sorted(folder.glob("*.jpg")) if folder.is_dir() else []
    if len(paths) == count:
        return paths, False
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root))
    make_images(scratch, count, size)
    try:
        os.rename(scratch, folder)
    except OSError:  # another run got there first (or a stale partial set is in the way)
        if len(list(folder.glob("*.jpg"))) != count:
            shutil.rmtree(folder, ignore_errors=True)
            os.rename(scratch, folder)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return sorted(folder.glob("*.jpg")), True


class JpegFolder(Dataset):
    def __init__(self, paths: list[Path], out_size: int) -> None:
        self.paths = paths
        self.out_size = out_size

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int):
        path = self.paths[index]
        image = Image.open(path).convert("RGB")
        image = image.resize((self.out_size, self.out_size), Image.BILINEAR)
        pixels = np.asarray(image, dtype=np.float32)
        tensor = torch.from_numpy(pixels).permute(2, 0, 1) / 255.0
        tensor = (tensor - 0.5) / 0.25
        if index % 2:
            tensor = tensor.flip(-1)
        label = int(path.stem.rsplit("_", 1)[1])
        return tensor, label


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, CLASSES),
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=128, help="images to generate (default 128)")
    p.add_argument("--image-size", type=int, default=448, help="JPEG side in pixels (default 448)")
    p.add_argument("--input-size", type=int, default=48, help="model input side (default 48)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, default=0, help="DataLoader workers (default 0)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: steady step times on small machines)")
    p.add_argument("--data", type=Path, default=None,
                   help="folder that caches the generated JPEGs "
                        "(default <tmp>/stallscope-demo-cache)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available()
                          else "cpu" if args.device == "auto" else args.device)
    torch.manual_seed(0)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    t = time.perf_counter()
    paths, made = cached_images(args.images, args.image_size, args.data)
    print(f"{'generated' if made else 'using'} {len(paths)} JPEGs ({args.image_size} px) in "
          f"{paths[0].parent} in {time.perf_counter() - t:.1f} s", flush=True)
    loader = DataLoader(JpegFolder(paths, args.input_size), batch_size=args.batch_size,
                        shuffle=True, num_workers=args.workers)
    model = make_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    for epoch in range(args.epochs):
        correct = seen = 0
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            logits = model(images)
            loss = loss_fn(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            correct += int((logits.argmax(1) == labels).sum())
            seen += len(labels)
            if step % 4 == 0:
                print(f"epoch {epoch} step {step:3d} loss {loss.item():.3f}", flush=True)
            step += 1
        print(f"epoch {epoch} accuracy {correct / max(seen, 1):.2f}", flush=True)


if __name__ == "__main__":
    main()
