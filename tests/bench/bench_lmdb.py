"""Benchmark: LMDB conversion and reading against the straightforward ways (run by hand).

    .venv/bin/python tests/bench/bench_lmdb.py            # 10,000 JPEGs of 256x256
    .venv/bin/python tests/bench/bench_lmdb.py --n 1000   # quick run

(a) conversion images/s: stallscope's converter (process pool + one writer) against a
    straightforward single-process loop (PIL decode, txn.put, commit every 1000). Goal >= 1.7x.
(b) reader samples/s: LMDBDataset against a PIL-decode ImageFolder-style Dataset, both plain
    indexing and in a DataLoader with the same num_workers. Goal >= 10x.
    reader MB/s against a plain in-memory copy of the same bytes. Goal >= 0.5x.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import lmdb
import numpy as np
from PIL import Image

from stallscope.core.jobs import run_job
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.dataset import LMDBDataset


def make_jpegs(root: Path, n: int, size: int = 256, classes: int = 10) -> list[Path]:
    """Smooth random images (compress like photos, unlike pure noise), quality 90."""
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    files = []
    for c in range(classes):
        (root / f"class{c:02d}").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        f = rng.uniform(1, 8, 3)
        p = rng.uniform(0, 6.28, 3)
        chans = [np.sin(f[k] * (xx + yy * (k + 1)) * 3.14 + p[k]) for k in range(3)]
        img = (np.stack(chans, -1) * 110 + 128 + rng.normal(0, 12, (size, size, 3))).clip(0, 255)
        path = root / f"class{i % classes:02d}" / f"{i:06d}.jpg"
        Image.fromarray(img.astype(np.uint8)).save(path, quality=90)
        files.append(path)
    return files


def baseline_convert(root: Path, dst: Path) -> int:
    """The straightforward loop: one process, PIL decode, txn.put, commit every 1000."""
    classes = sorted(d.name for d in root.iterdir() if d.is_dir())
    files = [(p, c) for c, name in enumerate(classes) for p in sorted((root / name).iterdir())]
    env = lmdb.open(str(dst), map_size=1 << 40)
    txn = env.begin(write=True)
    for i, (path, label) in enumerate(files):
        arr = np.asarray(Image.open(path).convert("RGB")).transpose(2, 0, 1)
        txn.put(b"%010d" % i, label.to_bytes(8, "little") + arr.tobytes())
        if (i + 1) % 1000 == 0:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    env.close()
    return len(files)


class PILFolder:
    """What most training scripts do: ImageFolder + PILToTensor (decode in __getitem__)."""

    def __init__(self, root: Path) -> None:
        classes = sorted(d.name for d in root.iterdir() if d.is_dir())
        self.items = [(p, c) for c, n in enumerate(classes) for p in sorted((root / n).iterdir())]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i):
        import torch

        path, label = self.items[i]
        with Image.open(path) as img:
            img = img.convert("RGB")
            t = torch.as_tensor(np.array(img, copy=True)).view(img.size[1], img.size[0], 3)
        return t.permute(2, 0, 1), label


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def index_rate(ds, order, budget_s: float) -> tuple[float, float]:
    """(samples/s, MB/s of the image tensors) indexing ds in the given order."""
    n = nbytes = 0
    t0 = time.perf_counter()
    for i in order:
        image, _label = ds[int(i)]
        nbytes += image.numel()
        n += 1
        if n % 64 == 0 and time.perf_counter() - t0 > budget_s:
            break
    dt = time.perf_counter() - t0
    return n / dt, nbytes / dt / 1e6


def loader_rate(ds, num_workers: int, budget_s: float, batch_size: int = 64) -> float:
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                        generator=torch.Generator().manual_seed(0))  # fmt: skip
    n, t0 = 0, None
    for images, _labels in loader:
        if t0 is None:  # leave worker start-up out, for both
            t0 = time.perf_counter()
            continue
        n += len(images)
        if time.perf_counter() - t0 > budget_s:
            break
    return n / (time.perf_counter() - t0)


def bytes_copy_rate(records: list[bytes], order, budget_s: float) -> float:
    """MB/s of copying each sample's bytes out of an in-memory list (one memcpy each)."""
    nbytes = 0
    t0 = time.perf_counter()
    for k, i in enumerate(order):
        copy = bytearray(records[int(i) % len(records)])
        nbytes += len(copy)
        if k % 64 == 63 and time.perf_counter() - t0 > budget_s:
            break
    return nbytes / (time.perf_counter() - t0) / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="number of 256x256 JPEGs")
    ap.add_argument("--workers", type=int, default=None, help="converter workers (default: all)")
    ap.add_argument("--num-workers", type=int, default=0, help="DataLoader num_workers")
    ap.add_argument("--seconds", type=float, default=4.0, help="time budget per read figure")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="stallscope-bench-lmdb-"))
    try:
        print(f"cores: {os.cpu_count()}, images: {args.n} JPEG 256x256, tmp: {tmp}")
        _, dt = timed(make_jpegs, tmp / "src", args.n)
        print(f"generated JPEGs in {dt:.1f} s")

        print("\n(a) conversion")
        c0 = time.process_time()
        n, t_base = timed(baseline_convert, tmp / "src", tmp / "base.lmdb")
        base, base_cpu = n / t_base, (time.process_time() - c0) / n * 1e3
        print(f"  straightforward loop (1 process)  : {base:8.0f} images/s ({t_base:.1f} s), "
              f"CPU {base_cpu:.2f} ms/image")  # fmt: skip
        figures = {}
        for workers in (0, args.workers):
            name = "workers=0" if workers == 0 else f"workers={workers or os.cpu_count()}"
            dst = tmp / f"ours{workers}.lmdb"
            c0, k0 = time.process_time(), _children_cpu()
            result, dt = timed(run_job, convert(tmp / "src", dst, workers=workers))
            main_ms = (time.process_time() - c0) / result.count * 1e3
            kids_ms = (_children_cpu() - k0) / result.count * 1e3
            figures[workers] = result.count / dt
            print(f"  stallscope {name:<23}: {figures[workers]:8.0f} images/s ({dt:.1f} s)"
                  f"  = {figures[workers] / base:.2f}x, CPU ms/image: writer {main_ms:.2f}"
                  f" + decoders {kids_ms:.2f}")  # fmt: skip
            if workers == 0:
                shutil.rmtree(dst)
        cores = os.cpu_count() or 1
        ideal = 1e3 / max((main_ms + kids_ms) / cores, main_ms, kids_ms / max(workers or cores, 1))
        print(f"  CPU-bound ceiling on {cores} idle cores: {ideal:.0f} images/s "
              f"= {ideal / (1e3 / base_cpu):.2f}x the baseline's CPU-bound rate "
              f"(load average now {os.getloadavg()[0]:.1f})")  # fmt: skip
        print(f"  speed-up vs straightforward: {figures[args.workers] / base:.2f}x (goal >= 1.7x)")
        shutil.rmtree(tmp / "base.lmdb")

        import torch

        torch.set_num_threads(1)  # as in DataLoader workers; 2 intra-op threads thrash 2 cores
        print("\n(b) reading (page cache warm, shuffled order, torch threads=1)")
        dst = tmp / f"ours{args.workers}.lmdb"
        ds, pil = LMDBDataset(dst), PILFolder(tmp / "src")
        order = np.random.default_rng(1).permutation(len(ds))
        index_rate(ds, order, 30.0)  # warm-up: map every page once in this process
        pil_rate, _ = index_rate(pil, order, args.seconds)
        lmdb_rate, lmdb_mb = index_rate(ds, order, args.seconds)
        print(f"  PIL-decode ImageFolder Dataset  : {pil_rate:9.0f} samples/s")
        print(f"  LMDBDataset                     : {lmdb_rate:9.0f} samples/s"
              f"  = {lmdb_rate / pil_rate:.1f}x (goal >= 10x)")  # fmt: skip
        pil_dl = loader_rate(pil, args.num_workers, args.seconds)
        lmdb_dl = loader_rate(ds, args.num_workers, args.seconds)
        print(f"  in DataLoader(batch 64, num_workers={args.num_workers}): PIL {pil_dl:.0f}/s, "
              f"LMDB {lmdb_dl:.0f}/s = {lmdb_dl / pil_dl:.1f}x")  # fmt: skip
        sample = 3 * 256 * 256
        records = [bytes(ds.arrays(int(i))[1][0]) for i in order[: min(len(ds), 2000)]]
        assert all(len(r) == sample for r in records)
        copy_mb = bytes_copy_rate(records, order, args.seconds)
        print(f"  LMDBDataset MB/s                : {lmdb_mb:9.0f} MB/s")
        print(f"  in-memory bytes copy MB/s       : {copy_mb:9.0f} MB/s"
              f"  -> reader at {lmdb_mb / copy_mb:.2f}x (goal >= 0.5x)")  # fmt: skip
        ds.close()
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
