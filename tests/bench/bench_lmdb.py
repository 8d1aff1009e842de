"""Benchmark: LMDB conversion, size and reads for tiny images and super-resolution pairs,
against the seed's naive LMDB loop and a PIL ImageFolder (run by hand; figures in the report).

    .venv/bin/python tests/bench/bench_lmdb.py                 # 100k 16x16 PNGs + 400 SR pairs
    .venv/bin/python tests/bench/bench_lmdb.py --million       # 1M 16x16 PNGs (disk: ~6 GB)
    .venv/bin/python tests/bench/bench_lmdb.py --n 20000 --sr 0 --seconds 2   # quick
    .venv/bin/python tests/bench/bench_lmdb.py --src /tmp/tiny100k --convert-only --repeats 4 --sr 0
    .venv/bin/python tests/bench/bench_lmdb.py --million --src /tmp/tiny1m --convert-only \
        --repeats 2 --sr 0      # the folder is made once under --src (1M: ~3 min) and reused

For each set:
(a) conversion: time and bytes per sample, stallscope's converter against the seed's naive loop
    (000_*.txt: PIL -> CHW uint8 bytes, txn.put(relpath, bytes), commit every 1000), in
    alternating pairs (--repeats): wall and CPU (this process and the decoding workers) of each,
    the load average beside it, min and median. Goal: >= 2x at 100k and at 1M.
(b) reads, shuffled, in a plain DataLoader loop (the clock starts at the first batch), at
    num_workers 0 and 2, page cache cold then warm:
      PIL ImageFolder (decode per sample, default collate), the seed's LMDB reader (one get +
      frombuffer per sample, default collate), LMDBDataset through the documented snippet
      (batch_size 512, default collate: __getitems__), and through the batch_sampler path.
    Goals (16x16): on disk <= 1.15x the pixel bytes; LMDBDataset via the snippet cold >= 8x and
    warm >= 10x the PIL ImageFolder.
    Cold: posix_fadvise(POSIX_FADV_DONTNEED) on every file read (the source files, data.mdb),
    no root needed (--drop-caches: `echo 3 > /proc/sys/vm/drop_caches` instead, root only).
(c) the reader's readahead default: LMDBDataset cold with readahead on and off.
(d) stallscope's own --measure next to the plain loop (they should agree within noise).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from statistics import median

import lmdb
import numpy as np
from PIL import Image

from stallscope.core.jobs import run_job
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.measure import measure

BATCH = 512


# ----------------------------------------------------------------------------- data


def make_tiny(root: Path, n: int, side: int = 16, classes: int = 1000) -> None:
    """n smooth-ish random PNGs of side x side in `classes` class folders."""
    rng = np.random.default_rng(0)
    for c in range(classes):
        (root / f"c{c:04d}").mkdir(parents=True, exist_ok=True)
    base = rng.integers(0, 256, (64, side, side, 3), dtype=np.uint8)
    for i in range(n):
        img = base[i % 64] ^ np.uint8(i % 251)
        Image.fromarray(img).save(root / f"c{i % classes:04d}" / f"{i:07d}.png", compress_level=1)


SR_FACTORY = textwrap.dedent(
    """
    from pathlib import Path

    import numpy as np
    import torch
    from PIL import Image

    ROOT = Path(__file__).parent / "hr"

    class Pairs:
        # a typical SR Dataset: PNG decode, a 4x downscale, ToTensor()-style floats
        def __init__(self):
            self.files = sorted(ROOT.glob("*.png"))

        def __len__(self):
            return len(self.files)

        def __getitem__(self, i):
            hr = Image.open(self.files[i]).convert("RGB")
            lr = hr.resize((hr.width // 4, hr.height // 4), Image.BICUBIC)
            to_tensor = lambda im: torch.from_numpy(np.asarray(im).copy()).permute(2, 0, 1)
            return to_tensor(lr).float().div(255), to_tensor(hr).float().div(255)

    def make():
        return Pairs()
    """
)


def make_sr(folder: Path, n: int, side: int) -> str:
    rng = np.random.default_rng(1)
    (folder / "hr").mkdir(parents=True)
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float32) / side
    for i in range(n):
        f = rng.uniform(1, 8, 3)
        chans = [np.sin(f[k] * (xx + yy * (k + 1)) * 3.14) for k in range(3)]
        img = (np.stack(chans, -1) * 110 + 128 + rng.normal(0, 8, (side, side, 3))).clip(0, 255)
        Image.fromarray(img.astype(np.uint8)).save(folder / "hr" / f"{i:04d}.png")
    (folder / "pairs.py").write_text(SR_FACTORY)
    return f"{folder / 'pairs.py'}:make"


# ----------------------------------------------------------------------------- pipelines


def seed_convert(root: Path, dst: Path) -> int:
    """The seed's loop: one process, PIL -> CHW uint8 bytes, txn.put(relpath), commit/1000."""
    classes = sorted(d.name for d in root.iterdir() if d.is_dir())
    files = [(p, c) for c, name in enumerate(classes) for p in sorted((root / name).iterdir())]
    env = lmdb.open(str(dst), map_size=1 << 40)
    txn = env.begin(write=True)
    for i, (path, label) in enumerate(files):
        arr = np.asarray(Image.open(path).convert("RGB")).transpose(2, 0, 1)
        key = os.path.relpath(path, root).encode()
        txn.put(key, label.to_bytes(8, "little") + arr.tobytes())
        if (i + 1) % 1000 == 0:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    env.close()
    return len(files)


class SeedReader:
    """The seed's reader: env opened in each worker, one get + frombuffer per sample."""

    def __init__(self, root: Path, dst: Path, shape: tuple[int, ...]) -> None:
        classes = sorted(d.name for d in root.iterdir() if d.is_dir())
        self.keys = [f"{c}/{p.name}".encode()
                     for c in classes for p in sorted((root / c).iterdir())]  # fmt: skip
        self.dst, self.shape, self.env = str(dst), shape, None

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i):
        import torch

        if self.env is None:
            self.env = lmdb.open(self.dst, readonly=True, lock=False, readahead=False)
        with self.env.begin() as txn:
            raw = txn.get(self.keys[i])
        label = int.from_bytes(raw[:8], "little")
        return torch.frombuffer(bytearray(raw[8:]), dtype=torch.uint8).view(self.shape), label

    def __getstate__(self):
        return dict(self.__dict__, env=None)


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
            arr = np.asarray(img.convert("RGB"))
        return torch.from_numpy(arr.copy()).permute(2, 0, 1), label

    def files(self) -> list[str]:
        return [str(p) for p, _c in self.items]


# ----------------------------------------------------------------------------- timing


def drop_cache(paths, use_proc: bool) -> None:
    if use_proc:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def loader_for(kind: str, ds, workers: int):
    import torch
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler

    g = torch.Generator().manual_seed(0)
    if kind == "batch_sampler":
        sampler = BatchSampler(RandomSampler(ds, generator=g), BATCH, drop_last=False)
        return DataLoader(ds, sampler=sampler, batch_size=None, num_workers=workers,
                          persistent_workers=workers > 0)  # fmt: skip
    return DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers, generator=g,
                      persistent_workers=workers > 0)  # fmt: skip


def timed_pass(loader, max_samples: int, seconds: float) -> float:
    """samples/s of a plain loop over the loader, the clock started at the first batch."""
    n, t0 = 0, None
    while True:
        for batch in loader:
            first = batch[0] if isinstance(batch, list | tuple) else batch
            if t0 is None:
                t0 = time.perf_counter()
                continue
            n += len(first)
            if n >= max_samples or time.perf_counter() - t0 >= seconds:
                return n / (time.perf_counter() - t0)
        if t0 is None:
            return 0.0


def cold_then_warm(loader, files, args) -> tuple[float, float]:
    drop_cache(files, args.drop_caches)
    cold = timed_pass(loader, args.cold_samples, 1e9)
    warm = timed_pass(loader, 10**9, args.seconds)
    it = getattr(loader, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    return cold, warm


def show(name: str, cold: float, warm: float, ref: tuple[float, float] | None) -> None:
    vs = f"   = {cold / ref[0]:5.1f}x / {warm / ref[1]:5.1f}x" if ref else ""
    print(f"    {name:<44} cold {cold:9,.0f}/s  warm {warm:9,.0f}/s{vs}")


# ----------------------------------------------------------------------------- sets


def tiny_source(tmp: Path, args, n: int) -> tuple[Path, bool]:
    """(the 16x16 folder, whether it is ours to delete): --src DIR is made once and kept."""
    if args.src is None:
        src = tmp / "tiny"
    else:
        src = Path(args.src).expanduser().resolve()
        found = sum(1 for _ in src.glob("c*/*.png")) if src.is_dir() else 0
        if found == n:
            print(f"\n== {n:,} 16x16 PNGs in 1000 classes (kept in {src})")
            return src, False
        if found:
            sys.exit(f"{src} holds {found:,} PNGs, not {n:,}: give another --src")
    t0 = time.perf_counter()
    make_tiny(src, n)
    print(f"\n== {n:,} 16x16 PNGs in 1000 classes (made in {time.perf_counter() - t0:.0f} s)")
    return src, args.src is None


def cpu_now() -> float:
    """CPU seconds of this process and of its waited-for children (the decoding workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def convert_pairs(src: Path, tmp: Path, n: int, args):
    """Conversion in alternating pairs (seed first, then stallscope first, ...): wall and CPU
    of each, min and median. Returns the last (seed bytes, stallscope result)."""
    pixel = 3 * 16 * 16
    runs: dict[str, list[tuple[float, float]]] = {"seed": [], "ours": []}
    seed_bytes, result = 0, None
    print(f"  (a) conversion, {args.repeats} alternating pair(s), "
          f"workers={args.workers if args.workers is not None else 'all'}")  # fmt: skip
    for r in range(args.repeats):
        for who in ("seed", "ours") if r % 2 == 0 else ("ours", "seed"):
            shutil.rmtree(tmp / f"{who}.lmdb", ignore_errors=True)
            load = os.getloadavg()[0]
            c0, t0 = cpu_now(), time.perf_counter()
            if who == "seed":
                seed_convert(src, tmp / "seed.lmdb")
            else:
                result = run_job(convert(src, tmp / "ours.lmdb", workers=args.workers))
            wall, cpu = time.perf_counter() - t0, cpu_now() - c0
            if who == "seed":
                seed_bytes = os.path.getsize(tmp / "seed.lmdb" / "data.mdb")
            runs[who].append((wall, cpu))
            print(f"    pair {r + 1} {who:4}: {wall:7.2f} s wall, {cpu:7.2f} s CPU "
                  f"({1e6 * wall / n:5.1f} / {1e6 * cpu / n:5.1f} us per image), "
                  f"load average {load:.1f}")  # fmt: skip
    assert result is not None and result.count == n, result
    seed_w = sorted(w for w, _c in runs["seed"])
    ours_w = sorted(w for w, _c in runs["ours"])
    per_pair = sorted(s / o for (s, _a), (o, _b) in zip(runs["seed"], runs["ours"], strict=True))
    print(f"    seed's naive loop : min {seed_w[0]:7.2f} s, median {median(seed_w):7.2f} s, "
          f"{seed_bytes / n:7.0f} B/sample ({seed_bytes / n / pixel:.2f}x the {pixel} pixel "
          "bytes)")  # fmt: skip
    print(f"    stallscope        : min {ours_w[0]:7.2f} s, median {median(ours_w):7.2f} s, "
          f"{result.bytes_on_disk / n:7.0f} B/sample ({result.bytes_on_disk / n / pixel:.3f}x; "
          "goal <= 1.15x)")  # fmt: skip
    print(f"    speed-up (goal >= 2x): {seed_w[0] / ours_w[0]:.2f}x by min, "
          f"{median(seed_w) / median(ours_w):.2f}x by median, per pair {per_pair[0]:.2f}x.."
          f"{per_pair[-1]:.2f}x")  # fmt: skip
    return seed_bytes, result


def bench_tiny(tmp: Path, args) -> None:
    import torch

    n = 1_000_000 if args.million else args.n
    src, ours_to_delete = tiny_source(tmp, args, n)
    convert_pairs(src, tmp, n, args)  # leaves seed.lmdb and ours.lmdb for the reads
    if args.convert_only:
        for path in ("seed.lmdb", "ours.lmdb"):
            shutil.rmtree(tmp / path)
        if ours_to_delete:
            shutil.rmtree(src)
        return

    torch.set_num_threads(1)
    files = PILFolder(src).files()
    data = [str(tmp / "ours.lmdb" / "data.mdb")]
    seed_data = [str(tmp / "seed.lmdb" / "data.mdb")]
    print(f"  (b) reads (shuffled, batch {BATCH}; cold = first {args.cold_samples:,} samples "
          "after the cache drop)")  # fmt: skip
    for workers in (0, 2):
        print(f"   num_workers={workers}")
        ref = cold_then_warm(loader_for("default", PILFolder(src), workers), files, args)
        show("PIL ImageFolder", *ref, None)
        seed = SeedReader(src, tmp / "seed.lmdb", (3, 16, 16))
        show("seed's LMDB reader", *cold_then_warm(loader_for("default", seed, workers),
                                                  seed_data, args), ref)  # fmt: skip
        ours = cold_then_warm(loader_for("default", LMDBDataset(tmp / "ours.lmdb"), workers),
                              data, args)  # fmt: skip
        show("LMDBDataset, documented snippet", *ours, ref)
        print(f"      goals: cold >= 8x ({ours[0] / ref[0]:.1f}x), warm >= 10x "
              f"({ours[1] / ref[1]:.1f}x)")  # fmt: skip
        show("LMDBDataset, batch_sampler path", *cold_then_warm(
            loader_for("batch_sampler", LMDBDataset(tmp / "ours.lmdb"), workers), data, args),
            ref)  # fmt: skip
    print("  (c) readahead (num_workers=0, documented snippet)")
    for ra in (True, False):
        ds = LMDBDataset(tmp / "ours.lmdb", readahead=ra)
        show(f"readahead={ra}", *cold_then_warm(loader_for("default", ds, 0), data, args), None)
    print("  (d) stallscope's --measure (its choice of num_workers) next to the loop above")
    t = run_job(measure(tmp / "ours.lmdb", seconds=args.seconds, max_samples=args.cold_samples))
    print(f"    measure: num_workers={t.num_workers} batch={t.batch_size}: LMDB cold "
          f"{t.after_cold.samples_per_s:,.0f}/s warm {t.after.samples_per_s:,.0f}/s; original "
          f"warm {t.before.samples_per_s:,.0f}/s: {t.verdict()}")  # fmt: skip
    for path in ("seed.lmdb", "ours.lmdb"):
        shutil.rmtree(tmp / path)
    if ours_to_delete:
        shutil.rmtree(src)


def bench_sr(tmp: Path, args) -> None:
    import torch

    folder = tmp / "sr"
    spec = make_sr(folder, args.sr, args.sr_size)
    side = args.sr_size
    pixel = 3 * side * side + 3 * (side // 4) ** 2
    print(f"\n== {args.sr} SR pairs: HR {side}x{side} PNG, LR 4x smaller, ToTensor() floats")
    t0 = time.perf_counter()
    result = run_job(convert(spec, tmp / "sr.lmdb", workers=args.workers))
    dt = time.perf_counter() - t0
    per = result.bytes_on_disk / result.count
    print(f"  (a) conversion: {dt:.1f} s, {per:,.0f} B per pair = {per / pixel:.3f}x the uint8 "
          f"pixels (float32 would be {4 * pixel:,} B: {4 * pixel / per:.1f}x more); fields: "
          + "; ".join(f["dtype"] + " from " + str(f["from"]) for f in result.fields))
    sys.path.insert(0, str(folder))
    import pairs  # noqa: E402 - the factory, as the training script would use it

    files = [str(p) for p in sorted((folder / "hr").glob("*.png"))]
    data = [str(tmp / "sr.lmdb" / "data.mdb")]
    torch.set_num_threads(1)
    global BATCH
    saved, BATCH = BATCH, 16
    print("  (b) reads (batch 16)")
    for workers in (0, 2):
        print(f"   num_workers={workers}")
        ref = cold_then_warm(loader_for("default", pairs.make(), workers), files, args)
        show("decode per sample (the factory)", *ref, None)
        show("LMDBDataset (uint8; .float().div_(255) on GPU)", *cold_then_warm(
            loader_for("default", LMDBDataset(tmp / "sr.lmdb"), workers), data, args), ref)
        show("LMDBDataset(floats=True)", *cold_then_warm(
            loader_for("default", LMDBDataset(tmp / "sr.lmdb", floats=True), workers), data,
            args), ref)  # fmt: skip
    BATCH = saved
    shutil.rmtree(folder)
    shutil.rmtree(tmp / "sr.lmdb")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="tiny 16x16 PNGs (0: skip)")
    ap.add_argument("--million", action="store_true", help="1,000,000 tiny PNGs")
    ap.add_argument("--sr", type=int, default=400, help="SR pairs (0: skip)")
    ap.add_argument("--sr-size", type=int, default=256, help="HR side of the SR pairs")
    ap.add_argument("--src", default=None,
                    help="the 16x16 folder: made there once, kept and reused by later runs")
    ap.add_argument("--convert-only", action="store_true", help="(a) only: no reads")
    ap.add_argument("--repeats", type=int, default=1, help="alternating conversion pairs")
    ap.add_argument("--workers", type=int, default=None, help="converter workers (default: all)")
    ap.add_argument("--seconds", type=float, default=4.0, help="time budget per warm figure")
    ap.add_argument("--cold-samples", type=int, default=20_000, help="samples per cold figure")
    ap.add_argument("--drop-caches", action="store_true",
                    help="cold via /proc/sys/vm/drop_caches (root) instead of posix_fadvise")
    ap.add_argument("--dir", default=None, help="where to put the data (default: a temp dir)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="stallscope-bench-lmdb-", dir=args.dir))
    try:
        print(f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}, tmp: {tmp}")
        if args.n or args.million:
            bench_tiny(tmp, args)
        if args.sr:
            bench_sr(tmp, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
