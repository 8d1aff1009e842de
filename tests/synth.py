"""Big synthetic multi-rank jobs built from one real rank's trace, for tests and benchmarks.

    python tests/synth.py OUT_DIR 64 --template hta_sampled_rank-0.json.gz \\
        --repeat 10 --slow 17 --slow-ms 20

Each rank is a copy of the template (its steps tiled `repeat` times, step names and correlation
ids continued) written as its own `rank<R>.<epoch ms>.pt.trace.json.gz` with distributedInfo
{rank, world_size}. Time is moved, never invented: in every step each rank r first waits
D(r, s) on the DataLoader (a `enumerate(DataLoader)#...__next__` annotation at the step's start;
everything it launches until the step's first collective starts D(r, s) later), and the step's
first collective on every rank ends when the last rank reaches it (its kernel grows by
max_r D - D(r, s); everything after it moves by max_r D). D is uniform jitter in [0, jitter_us],
plus `slow_us` on the slow rank. So the injected straggler is known, and so is its cause:
data loading.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from stallscope.core.kineto import DATALOADER_PREFIXES, is_comm_name, is_step_name

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset")
DATALOADER_NAME = DATALOADER_PREFIXES[0] + "_SingleProcessDataLoaderIter.__next__"
_STEP_NUM = re.compile(r"#(\d+)$")


@dataclass
class SynthJob:
    folder: Path
    paths: list[Path]          # in rank order
    slow_rank: int | None
    slow_us: float
    cause: str = "data_loading"


class _Template:
    """The template's events, tiled, split into what moves (ts, dur) and what does not."""

    def __init__(self, path: Path, repeat: int) -> None:
        doc = msgspec.json.decode(_read(path))
        if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
            raise ValueError(f"{path}: not a Chrome trace with traceEvents")
        self.meta = {k: v for k, v in doc.items() if k not in ("traceEvents", "distributedInfo")}
        events = [e for e in doc["traceEvents"] if isinstance(e, dict)]
        steps = [e for e in events if e.get("ph") == "X" and is_step_name(str(e.get("name")))
                 and e.get("cat") not in ("gpu_user_annotation",)]
        if not steps:
            raise ValueError(f"{path}: the template has no ProfilerStep#N")
        steps.sort(key=lambda e: e["ts"])
        lo, hi = steps[0]["ts"], max(e["ts"] + e["dur"] for e in steps)
        self.main = (steps[0]["pid"], steps[0]["tid"])
        events = _tile(events, steps, lo, hi, repeat)
        timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
        self.fixed = [e for e in events if not isinstance(e.get("ts"), (int, float))]
        timed.sort(key=lambda e: e["ts"])
        self.ts = np.array([e["ts"] for e in timed], dtype=np.float64)
        self.dur = np.array([e.get("dur", 0) or 0 for e in timed], dtype=np.float64)
        self.has_dur = np.array(["dur" in e for e in timed])
        is_step = np.array([e.get("ph") == "X" and is_step_name(str(e.get("name")))
                            and e.get("cat") != "gpu_user_annotation" for e in timed])
        comm = np.array([e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES
                         and is_comm_name(str(e.get("name"))) for e in timed])
        self.step_start = self.ts[is_step]
        self.step_end = self.step_start + self.dur[is_step]
        # the step's first collective: its kernel waits for the last rank
        self.first_comm = np.full(len(self.step_start), -1)
        self.c0 = self.step_end.copy()
        comm_idx = np.flatnonzero(comm)
        for j, (a, b) in enumerate(zip(self.step_start, self.step_end, strict=True)):
            inside = comm_idx[(self.ts[comm_idx] >= a) & (self.ts[comm_idx] < b)]
            if len(inside):
                self.first_comm[j] = inside[0]
                self.c0[j] = self.ts[inside[0]]
        self.stretch = np.zeros(len(timed), dtype=bool)  # ends move with the map, not the start
        self.stretch[is_step] = True
        self.stretch[self.first_comm[self.first_comm >= 0]] = True
        # Each event's JSON without ts/dur: {"ts":..,"dur":.., + body
        bodies = []
        for e in timed:
            rest = {k: v for k, v in e.items() if k not in ("ts", "dur")}
            bodies.append(msgspec.json.encode(rest)[1:])  # without its opening brace
        self.bodies = bodies
        self.dl_body = msgspec.json.encode({"ph": "X", "cat": "user_annotation",
                                            "name": DATALOADER_NAME, "pid": self.main[0],
                                            "tid": self.main[1], "args": {}})[1:]

    def rank_json(self, rank: int, world: int, delays: np.ndarray) -> bytes:
        """One rank's trace: delays (per step) for this rank; waits up to the steps' max."""
        own, most = delays[rank], delays.max(axis=0)
        ts, end = self._map(self.ts, own, most), None
        end_plain = ts + self.dur
        end = np.where(self.stretch, self._map(self.ts + self.dur, own, most), end_plain)
        dur = np.round(end - ts).astype(np.int64)
        ts = np.round(ts).astype(np.int64)
        pieces = [b'{"ts":%d,"dur":%d,' % (t, d) + body if h else b'{"ts":%d,' % t + body
                  for t, d, h, body in zip(ts.tolist(), dur.tolist(), self.has_dur.tolist(),
                                           self.bodies, strict=True)]
        shift = self._cum(most)
        for j, start in enumerate(self.step_start):
            if own[j] >= 1:
                pieces.append(b'{"ts":%d,"dur":%d,' % (round(start + shift[j]), round(own[j]))
                              + self.dl_body)
        pieces += [msgspec.json.encode(e) for e in self.fixed]
        head = dict(self.meta)
        head["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
        head_json = msgspec.json.encode(head)
        return head_json[:-1] + b',"traceEvents":[' + b",\n".join(pieces) + b"]}"

    def _cum(self, most: np.ndarray) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(most)[:-1]])

    def _map(self, t: np.ndarray, own: np.ndarray, most: np.ndarray) -> np.ndarray:
        """Time t of the template on this rank: before the first step unchanged; in step j up to
        its first collective's start + cum_j + own_j; after it + cum_j + max_j."""
        cum = self._cum(most)
        j = np.searchsorted(self.step_start, t, side="left") - 1
        jj = np.maximum(j, 0)
        before_c0 = t <= self.c0[jj]
        shift = np.where(before_c0, cum[jj] + own[jj], cum[jj] + most[jj])
        return np.where(j >= 0, t + shift, t)


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _tile(events: list[dict], steps: list[dict], lo: float, hi: float, repeat: int) -> list[dict]:
    """The steps' window repeated `repeat` times: later copies move by k * width, step numbers
    and correlation/flow ids continue; events after the window move past the last copy."""
    if repeat <= 1:
        return events
    width = hi - lo
    nums = [int(m.group(1)) for e in steps if (m := _STEP_NUM.search(e["name"]))]
    span = max(nums) - min(nums) + 1 if nums else len(steps)
    ids = [e.get("id") for e in events if isinstance(e.get("id"), int)]
    corr = [e["args"].get("correlation") for e in events if isinstance(e.get("args"), dict)
            and isinstance(e["args"].get("correlation"), int)]
    id_step = max(ids + corr + [0]) + 1
    inside = [e for e in events if isinstance(e.get("ts"), (int, float)) and lo <= e["ts"] < hi]
    out = []
    for e in events:
        ts = e.get("ts")
        if isinstance(ts, (int, float)) and ts >= hi:
            e = dict(e, ts=ts + (repeat - 1) * width)
        out.append(e)
    for k in range(1, repeat):
        for e in inside:
            c = dict(e, ts=e["ts"] + k * width)
            if isinstance(e.get("id"), int):
                c["id"] = e["id"] + k * id_step
            args = e.get("args")
            if isinstance(args, dict) and isinstance(args.get("correlation"), int):
                c["args"] = dict(args, correlation=args["correlation"] + k * id_step)
            if e.get("ph") == "X" and is_step_name(str(e.get("name"))):
                n = int(_STEP_NUM.search(e["name"]).group(1))
                c["name"] = f"ProfilerStep#{n + k * span}"
            out.append(c)
    return out


def make_job(out_dir: str | os.PathLike, ranks: int, template: str | os.PathLike,
             repeat: int = 1, slow_rank: int | None = None, slow_us: float = 20_000.0,
             jitter_us: float = 200.0, seed: int = 0, level: int = 1) -> SynthJob:
    """Write `ranks` rank traces into out_dir (created); returns their paths in rank order."""
    if ranks < 1:
        raise ValueError("ranks must be >= 1")
    if slow_rank is not None and not 0 <= slow_rank < ranks:
        raise ValueError(f"slow rank {slow_rank} is not one of 0..{ranks - 1}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tpl = _Template(Path(template), repeat)
    rng = np.random.default_rng(seed)
    delays = rng.uniform(0.0, jitter_us, size=(ranks, len(tpl.step_start)))
    if slow_rank is not None:
        delays[slow_rank] += slow_us
    stamp = int(time.time() * 1000)
    paths = []
    for r in range(ranks):
        p = out / f"rank{r}.{stamp + r}.pt.trace.json.gz"
        tmp = p.with_name("." + p.name + ".part")
        tmp.write_bytes(gzip.compress(tpl.rank_json(r, ranks, delays), compresslevel=level))
        tmp.replace(p)
        paths.append(p)
    return SynthJob(out, paths, slow_rank, slow_us if slow_rank is not None else 0.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python tests/synth.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="folder to write the rank traces into")
    p.add_argument("ranks", type=int)
    p.add_argument("--template", required=True, help="one rank's real trace (.json or .json.gz)")
    p.add_argument("--repeat", type=int, default=1, help="tile the template's steps N times")
    p.add_argument("--slow", type=int, help="the rank that waits longer on data")
    p.add_argument("--slow-ms", type=float, default=20.0)
    p.add_argument("--jitter-us", type=float, default=200.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    try:
        job = make_job(a.out, a.ranks, a.template, a.repeat, a.slow, a.slow_ms * 1000,
                       a.jitter_us, a.seed)
    except (OSError, ValueError, msgspec.DecodeError) as exc:
        print(f"synth: error: {exc}", file=sys.stderr)
        return 2
    print(f"{len(job.paths)} ranks in {job.folder}"
          + (f"; rank {job.slow_rank} waits {a.slow_ms:g} ms more on data per step"
             if job.slow_rank is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
