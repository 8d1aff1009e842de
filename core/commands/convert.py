"""`stallscope-cli convert SRC DST`: image folder or factory Dataset -> LMDB, resumable."""

from __future__ import annotations

import signal
import sys
import time

from stallscope.core import units
from stallscope.core.errors import StallscopeError
from stallscope.core.jobs import run_job
from stallscope.core.render.facts import write_json


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
    p.add_argument("--floats", choices=("auto", "float32", "float16"), default="auto",
                   help="a factory's float tensors: auto (uint8 when every value is k/255, "
                        "as ToTensor() makes them, else as they are), float32, "
                        "float16")  # fmt: skip
    p.add_argument("--commit-every", type=int, default=None, metavar="N",
                   help="samples per commit (default: a commit every 2 s or 256 MiB)")
    p.add_argument("--map-size", type=int, default=None, metavar="BYTES",
                   help="initial LMDB map size (grows as needed; default: estimated)")  # fmt: skip
    p.add_argument("--verify", type=int, default=64, metavar="N",
                   help="check every record's checksum and re-decode N random source samples "
                        "(0: skip)")  # fmt: skip
    p.add_argument("--seed", type=int, default=None,
                   help="which random samples --verify picks (default: new ones each run; "
                        "the seed is printed)")  # fmt: skip
    p.add_argument("--measure", action="store_true",
                   help="measure samples/s before and after, cold and warm (needs torch)")
    p.add_argument("--num-workers", type=int, default=None,
                   help="DataLoader workers for --measure and the snippet (default: chosen "
                        "for this machine)")  # fmt: skip
    p.add_argument("--batch-size", type=int, default=None,
                   help="batch size for --measure and the snippet (default: from the sample "
                        "size)")  # fmt: skip
    p.add_argument("--snippet", action="store_true",
                   help="print the reader code to paste into a training script (as the wizard "
                        "shows it)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def shown(text: str) -> str:
    """A name for the terminal: undecodable bytes (lone surrogates) as \\udcxx escapes."""
    return str(text).encode("utf-8", "backslashreplace").decode("utf-8")


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
        floats=args.floats,
    )
    if args.workers is not None and args.workers < 0:
        raise StallscopeError("--workers must be >= 0")
    progress = Progress("converting")
    job = convert(args.src, args.dst, workers=args.workers, preprocess=pre,
                  map_size=args.map_size,
                  commit_every=None if args.commit_every is None else max(1, args.commit_every))
    try:
        result = run_job(job, progress)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGHUP (signals.Terminated)
        job.close()  # when it came between two steps: commit what is decoded, close the LMDB
        progress.end()
        signum = int(getattr(exc, "signum", signal.SIGINT))
        how = "interrupted" if signum == signal.SIGINT else \
            f"ended by {signal.Signals(signum).name}"
        print(f"stallscope: {interrupted_line(args.dst, how)}", file=sys.stderr)
        return 128 + signum
    progress.end()
    out = {
        "dst": result.dst,
        "count": result.count,
        "source_count": result.total,
        "skipped": result.skipped,
        "scan_skipped": result.scan_skipped,
        "resumed_from": result.resumed_from,
        "already_complete": result.already_complete,
        "seconds": round(result.seconds, 3),
        "samples_per_s": round(result.samples_per_s, 1),
        "bytes_on_disk": result.bytes_on_disk,
        "bytes_per_sample": round(result.bytes_on_disk / max(result.count, 1), 1),
        "fields": result.fields,
        "survey": result.survey,
        "narrowed": result.narrowed,
        "padded": result.padded,
        "top_level_ignored": result.top_level.get("count", 0),
        "changed": result.changed,
    }
    if not args.json:
        print_result(result)
    rc = 0
    if args.verify > 0:
        from stallscope.core.lmdb.verify import verify

        progress = Progress("verifying")
        check = run_job(verify(result.dst, n=args.verify, seed=args.seed), progress)
        progress.end()
        out["verify"] = verify_json(check)
        if not args.json:
            print_verify(check)
        rc = 1 if check.mismatches or check.damaged else 0
    workers, batch = args.num_workers, args.batch_size
    if args.measure:
        from stallscope.core.lmdb.measure import measure

        progress = Progress("measuring")
        t = run_job(measure(result.dst, num_workers=workers, batch_size=batch), progress)
        progress.end()
        workers, batch = t.num_workers, t.batch_size
        out["throughput"] = throughput_json(t)
        if not args.json:
            print_throughput(t)
    if args.snippet:
        from stallscope.core.lmdb.snippet import lmdb_snippet

        snippet = lmdb_snippet(result.dst, workers, batch)
        out["snippet"] = snippet
        if not args.json:
            print("\nuse it in your training script:\n")
            print(snippet)
    if args.json:
        write_json(out, sys.stdout)
    return rc


def interrupted_line(dst: str, how: str = "interrupted") -> str:
    """What a Ctrl-C (or SIGTERM, SIGHUP) during a conversion kept, and how to go on."""
    from pathlib import Path

    from stallscope.core.lmdb.destination import destination_state

    path = Path(dst).expanduser().resolve()
    name = shown(str(path))
    try:
        state = destination_state(path)
    except StallscopeError:
        state = None
    if state is None or state.kind != "ours" or not state.progress:
        return f"{how} before any sample was committed to {name}; nothing was kept"
    kept = int(state.progress.get("written", 0))
    total = int(state.meta.get("source", {}).get("count", 0))
    of = f" of {total:,}" if total else ""
    return (f"{how}: {kept:,}{of} samples are kept in {name}; run the same "
            "command again to resume from there")


def print_result(result) -> None:
    from stallscope.core.lmdb.fields import field_lines
    from stallscope.core.lmdb.inspection import survey_line
    from stallscope.core.lmdb.notices import notices

    if result.already_complete:
        print(f"{shown(result.dst)}: already complete ({result.count} samples); nothing to do")
    else:
        per = result.bytes_on_disk / max(result.count, 1)
        took = (f"in {units.duration(result.seconds * 1e6)}, {result.samples_per_s:.0f} "
                "samples/s")
        if result.resumed_from:  # the figures of this run, the count of the whole LMDB
            took = (f"; resumed at {result.resumed_from:,}: {result.converted_now:,} source "
                    f"samples converted {took}")
        else:
            took = f" {took}"
        print(
            f"wrote {result.count:,} samples to {shown(result.dst)} "
            f"({units.size(result.bytes_on_disk)}, {per:,.0f} B per sample){took}"
        )
    for line in field_lines(result.fields):
        print(f"  {shown(line)}")
    s = result.survey
    name = result.fields[0]["name"] if result.fields else "value"
    line = survey_line(name, s.get("shapes", []), s.get("surveyed", 0), s.get("suggestion", ""),
                       s if s.get("exact") is True else None)  # fmt: skip
    if line:
        print(f"  {shown(line)}")
    for notice in notices(result):
        print(f"  {shown(notice)}")
    _listed("skipped {n} unreadable sample(s):", result.skipped)
    _listed("not listed as samples ({n}):", result.scan_skipped)


def _listed(head: str, items: list[dict]) -> None:
    if not items:
        return
    print(head.format(n=len(items)))
    for s in items[:20]:
        print(f"  {shown(s['path'])}: {shown(s['reason'])}")
    if len(items) > 20:
        print(f"  ... {len(items) - 20} more (stored in the LMDB's !report record)")


def verify_json(check) -> dict:
    """A verification as `verify --json` and `convert --json` (its "verify") write it."""
    return {
        "ok": check.ok, "records_checked": check.records_checked, "damaged": check.damaged,
        "checked": check.checked, "mismatches": check.mismatches, "problem": check.problem,
        "seed": check.seed, "checksums": check.checksums,
    }  # fmt: skip


def print_verify(check) -> None:
    print(f"verify: {shown(check.summary())}")
    for line in (check.damaged + check.mismatches)[:20]:
        print(f"  {shown(line)}")
    more = len(check.damaged) + len(check.mismatches) - 20
    if more > 0:
        print(f"  ... {more} more")
    if check.mismatches or check.checked:
        print(f"  (--seed {check.seed} checks the same samples again)")


def throughput_json(t) -> dict:
    rates = {"warm": (t.before, t.after), "cold": (t.before_cold, t.after_cold)}
    out: dict = {"num_workers": t.num_workers, "batch_size": t.batch_size}
    for temp, (before, after) in rates.items():
        if before is None or after is None:
            continue
        out[temp] = {
            r.name: {"samples_per_s": round(r.samples_per_s, 1), "mb_per_s": round(r.mb_per_s, 1)}
            for r in (before, after)
        }
        out[temp]["speedup"] = round(after.samples_per_s / max(before.samples_per_s, 1e-9), 2)
    out["speedup"] = round(t.speedup, 2)
    return out


def print_throughput(t) -> None:
    """A table: one row per page-cache state, a column per dataset, each figure labelled."""
    from stallscope.core.lmdb.measure import speed_words

    print(f"throughput in samples/s, DataLoader(batch_size={t.batch_size}, "
          f"num_workers={t.num_workers}, shuffled, {t.collate}):")  # fmt: skip
    before = t.before.name
    width = max(len(before), 10)
    print(f"  {'':<18}{before:>{width}}  {'LMDBDataset':>12}  {'LMDB MB/s':>10}")
    for temp, b, a in (("cold page cache", t.before_cold, t.after_cold),
                       ("warm page cache", t.before, t.after)):  # fmt: skip
        if b is None or a is None:
            continue
        ratio = a.samples_per_s / b.samples_per_s if b.samples_per_s else 0.0
        print(f"  {temp:<18}{b.samples_per_s:>{width},.0f}  {a.samples_per_s:>12,.0f}  "
              f"{a.mb_per_s:>10,.1f}  LMDB {speed_words(ratio)}")  # fmt: skip
    if t.tried_workers:
        tried = ", ".join(f"num_workers={w}: {r:,.0f}/s"
                          for w, r in sorted(t.tried_workers.items()))  # fmt: skip
        print(f"  num_workers={t.num_workers} (above and in the snippet) was chosen by a "
              f"shorter warm run of LMDBDataset each: {tried}")
    caveat = t.caveat()
    if caveat:
        print(f"  {caveat}")


class Progress:
    """One status line on a terminal; silent when stderr is not one. total 0: a scan."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.tty = sys.stderr.isatty()
        self.t0 = time.monotonic()
        self.first: tuple[float, int] | None = None  # (time, done) of the first update
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.tty or now - self.last < 0.25:
            return
        self.last = now
        if total == 0:
            print(f"\rscanning the source: {done:,} files   ", end="", file=sys.stderr)
            return
        if self.first is None:
            self.first = (now, done)
        t, d = self.first
        rate = (done - d) / (now - t) if now > t else 0.0
        eta = f", ETA {units.clock((total - done) / rate)}" if rate > 0 else ""
        print(f"\r{self.what} {done}/{total} ({rate:.0f}/s{eta})   ", end="", file=sys.stderr)

    def end(self) -> None:
        if self.tty:
            print("\r" + " " * 60 + "\r", end="", file=sys.stderr)
