"""Benchmark: overhead of the line-profiling capture on a Dataset.__getitem__.

Per-sample time of the demo's JpegFolder.__getitem__ (PIL decode + resize of generated JPEGs,
resources/demo/train_demo.py) with and without line profiling, and the same for a trivial
__getitem__ (where the fixed per-line cost dominates). Rounds alternate between the plain and
the profiled method in one process; the medians are printed. Also a DataLoader with 2 workers,
end to end (worker install, flush thread, merge).

    .venv/bin/python tests/bench/bench_lineprof.py [--images 64] [--rounds 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "core" / "capture" / "lineprof_capture.py"
DEMO_DIR = ROOT / "resources" / "demo"


def load_capture():
    spec = importlib.util.spec_from_file_location("stallscope_lineprof_capture", CAPTURE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def demo_module():
    if (DEMO_DIR / "train_demo.py").exists():
        sys.path.insert(0, str(DEMO_DIR))
        import train_demo

        return train_demo, "resources/demo/train_demo.py"
    raise SystemExit(f"the demo is missing ({DEMO_DIR}/train_demo.py)")


class Tiny:
    """A trivial __getitem__: five cheap lines, so the profiler's own cost shows."""

    def __len__(self):
        return 1000

    def __getitem__(self, i):
        a = i + 1
        b = a * 2
        c = b - i
        d = (a, b, c)
        return d


def per_sample(ds, n: int, repeat: int = 1) -> float:
    t = time.perf_counter()
    for _ in range(repeat):
        for i in range(n):
            ds[i]
    return (time.perf_counter() - t) / (n * repeat)


def alternate(klass, plain, profiled, ds, n: int, rounds: int, repeat: int = 1):
    off, on = [], []
    per_sample(ds, min(n, 8))  # warm caches
    for _ in range(rounds):
        klass.__getitem__ = plain
        off.append(per_sample(ds, n, repeat))
        klass.__getitem__ = profiled
        on.append(per_sample(ds, n, repeat))
    klass.__getitem__ = profiled
    return statistics.median(off), statistics.median(on)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    import torch
    from torch.utils.data import DataLoader

    torch.set_num_threads(1)
    cap_mod = load_capture()
    demo, where = demo_module()
    out = Path(tempfile.mkdtemp(prefix="stallscope-bench-lineprof-"))
    (out / "images").mkdir()
    paths = demo.make_images(out / "images", args.images, 448)
    ds = demo.JpegFolder(paths, 48)
    tiny = Tiny()

    plain_demo = demo.JpegFolder.__dict__["__getitem__"]
    plain_tiny = Tiny.__dict__["__getitem__"]
    cap = cap_mod.start("auto", 0, str(out / "session"), lambda e: print("event:", e))
    cap.on_dataloader(DataLoader(ds))
    cap.on_dataloader(DataLoader(tiny))
    prof_demo = demo.JpegFolder.__dict__["__getitem__"]
    prof_tiny = Tiny.__dict__["__getitem__"]
    assert prof_demo is not plain_demo and prof_tiny is not plain_tiny

    print(f"demo __getitem__ ({where}: {args.images} JPEGs 448 px -> 48 px), "
          f"{args.rounds} alternating rounds, medians:")
    off, on = alternate(demo.JpegFolder, plain_demo, prof_demo, ds, args.images, args.rounds)
    print(f"  plain     {off * 1e3:8.3f} ms/sample")
    print(f"  profiled  {on * 1e3:8.3f} ms/sample   overhead {100 * (on - off) / off:+.1f}% "
          f"({(on - off) * 1e6:+.1f} µs/sample)")
    off, on = alternate(Tiny, plain_tiny, prof_tiny, tiny, 1000, args.rounds, repeat=20)
    print("trivial __getitem__ (5 lines):")
    print(f"  plain     {off * 1e6:8.3f} µs/sample")
    print(f"  profiled  {on * 1e6:8.3f} µs/sample   (+{(on - off) * 1e6:.2f} µs/sample, "
          f"{(on - off) * 1e6 / 6:.2f} µs per profiled line)")

    # DataLoader with 2 workers, whole epochs; the order flips every round (the machine's load
    # drifts, and whichever goes second would otherwise pay for it).
    def epoch(profiled: bool) -> float:
        demo.JpegFolder.__getitem__ = prof_demo if profiled else plain_demo
        loader = DataLoader(ds, batch_size=16, num_workers=2)
        if profiled:
            cap.on_dataloader(loader)  # what the runner's patched DataLoader.__iter__ does
        t = time.perf_counter()
        n = 0
        for images, _labels in loader:
            n += len(images)
        return (time.perf_counter() - t) / n

    epochs = {False: [], True: []}
    for r in range(max(4, args.rounds)):
        for profiled in ((False, True) if r % 2 == 0 else (True, False)):
            epochs[profiled].append(epoch(profiled))
    demo.JpegFolder.__getitem__ = prof_demo
    off, on = statistics.median(epochs[False]), statistics.median(epochs[True])
    print("DataLoader(num_workers=2, batch_size=16), wall time per sample incl. worker start:")
    print(f"  plain     {off * 1e3:8.3f} ms/sample  "
          f"(rounds: {' '.join(f'{x * 1e3:.2f}' for x in epochs[False])})")
    print(f"  profiled  {on * 1e3:8.3f} ms/sample  "
          f"(rounds: {' '.join(f'{x * 1e3:.2f}' for x in epochs[True])})   "
          f"overhead {100 * (on - off) / off:+.1f}%")
    t = time.perf_counter()
    path = cap.finish()
    print(f"finish() merged main + worker stats in {(time.perf_counter() - t) * 1e3:.1f} ms: "
          f"{path}")


if __name__ == "__main__":
    main()
