"""`stallscope-cli convert SRC DST`: image folder or factory Dataset -> LMDB, resumable."""

from __future__ import annotations

import json
import sys
import time

from stallscope.core import units
from stallscope.core.errors import StallscopeError
from stallscope.core.jobs import run_job


def register(sub) -> None:
    p = sub.add_parser(
        "convert",
        help="convert an image folder or Dataset factory into an LMDB of decoded tensors",
        description=(
            "Decode SRC once into an LMDB at DST (uint8 CHW images + labels, no pickle). "
            "SRC is an image folder (class subfolders become labels) or FILE.py:FACTORY. "
            "Run it again with the same SRC and DST to resume an interrupted conversion."
        ),
    )
    p.add_argument("src", metavar="SRC", help="image folder, or path/to/file.py:factory")
    p.add_argument("dst", metavar="DST", help="LMDB folder to create (or resume)")
    p.add_argument("--workers", type=int, default=None, help="decoding processes (default: all)")
    p.add_argument("--resize", metavar="N|WxH", help="resize: shorter side to N, or to exactly WxH")
    p.add_argument("--crop", metavar="N|WxH", help="centre crop to NxN or WxH (after resizing)")
    p.add_argument(
        "--keep-mode", action="store_true", help="keep each image's colour mode (default: RGB)"
    )
    p.add_argument("--commit-every", type=int, default=1000, metavar="N", help="samples per commit")
    p.add_argument("--map-size", type=int, default=None, metavar="BYTES",
                   help="initial LMDB map size (grows as needed; default: estimated)")  # fmt: skip
    p.add_argument("--verify", type=int, default=64, metavar="N",
                   help="re-decode N random source samples and compare (0: skip)")  # fmt: skip
    p.add_argument("--measure", action="store_true",
                   help="measure samples/s before and after (needs torch)")  # fmt: skip
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader workers for --measure")
    p.add_argument("--snippet", action="store_true",
                   help="print the reader code to paste into a training script (as the wizard "
                        "shows it)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from stallscope.core.lmdb.convert import convert
    from stallscope.core.lmdb.images import Preprocess, parse_size

    crop = parse_size(args.crop, "--crop") if args.crop else None
    if isinstance(crop, int):
        crop = (crop, crop)
    pre = Preprocess(
        resize=parse_size(args.resize, "--resize") if args.resize else None,
        crop=crop,
        rgb=not args.keep_mode,
    )
    if args.workers is not None and args.workers < 0:
        raise StallscopeError("--workers must be >= 0")
    progress = _Progress("converting")
    result = run_job(
        convert(args.src, args.dst, workers=args.workers, preprocess=pre,
                map_size=args.map_size, commit_every=max(1, args.commit_every)),
        progress,
    )  # fmt: skip
    progress.end()
    out = {
        "dst": result.dst,
        "count": result.count,
        "source_count": result.total,
        "skipped": result.skipped,
        "resumed_from": result.resumed_from,
        "already_complete": result.already_complete,
        "seconds": round(result.seconds, 3),
        "samples_per_s": round(result.samples_per_s, 1),
        "bytes_on_disk": result.bytes_on_disk,
    }
    if not args.json:
        _print_result(result)
    rc = 0
    if args.verify > 0:
        from stallscope.core.lmdb.verify import verify

        check = run_job(verify(result.dst, n=args.verify))
        out["verify"] = {"checked": check.checked, "mismatches": check.mismatches,
                         "problem": check.problem, "ok": check.ok}  # fmt: skip
        if not args.json:
            print(f"verify: {check.summary()}")
            for line in check.mismatches[:20]:
                print(f"  {line}")
        rc = 1 if check.mismatches else 0
    if args.measure:
        from stallscope.core.lmdb.verify import measure

        progress = _Progress("measuring")
        t = run_job(measure(result.dst, num_workers=args.num_workers), progress)
        progress.end()
        out["throughput"] = {
            r.name: {"samples_per_s": round(r.samples_per_s, 1), "mb_per_s": round(r.mb_per_s, 1)}
            for r in (t.before, t.after)
        }
        out["throughput"]["speedup"] = round(t.speedup, 2)
        if not args.json:
            for r in (t.before, t.after):
                print(f"{r.name:>30}: {r.samples_per_s:10.0f} samples/s {r.mb_per_s:9.1f} MB/s")
            print(f"{'speed-up':>30}: {t.speedup:10.1f}x (num_workers={t.num_workers})")
    if args.snippet:
        from stallscope.core.lmdb.inspection import inspect_source
        from stallscope.core.lmdb.snippet import code_snippet

        snippet = code_snippet(result.dst, inspect_source(args.src, pre, n_preview=1, n_size=4))
        out["snippet"] = snippet
        if not args.json:
            print("\nuse it in your training script:\n")
            print(snippet)
    if args.json:
        print(json.dumps(out, indent=1))
    return rc


def _print_result(result) -> None:
    if result.already_complete:
        print(f"{result.dst}: already complete ({result.count} samples); nothing to do")
    else:
        resumed = f", resumed at {result.resumed_from}" if result.resumed_from else ""
        print(
            f"wrote {result.count} samples to {result.dst} ({units.size(result.bytes_on_disk)}) "
            f"in {units.duration(result.seconds * 1e6)}, {result.samples_per_s:.0f} samples/s"
            f"{resumed}"
        )
    if result.skipped:
        print(f"skipped {len(result.skipped)} unreadable sample(s):")
        for s in result.skipped[:20]:
            print(f"  {s['path']}: {s['reason']}")
        if len(result.skipped) > 20:
            print(f"  ... {len(result.skipped) - 20} more (stored in the LMDB's !report record)")


class _Progress:
    """One status line on a terminal; silent when stderr is not one."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.tty = sys.stderr.isatty()
        self.t0 = time.monotonic()
        self.first = None
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = (now, done)
        if not self.tty or now - self.last < 0.25:
            return
        self.last = now
        t, d = self.first
        rate = (done - d) / (now - t) if now > t else 0.0
        eta = f", ETA {units.clock((total - done) / rate)}" if rate > 0 else ""
        print(f"\r{self.what} {done}/{total} ({rate:.0f}/s{eta})   ", end="", file=sys.stderr)

    def end(self) -> None:
        if self.tty:
            print("\r" + " " * 60 + "\r", end="", file=sys.stderr)
