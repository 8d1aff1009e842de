"""Build big real-looking traces by tiling a real fixture in time (tests and benchmarks).

Copy k of every kept event is shifted by k * (span + pause) µs; ProfilerStep#N becomes
ProfilerStep#(N + k * steps) so the steps stay distinct.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}


def read_events(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def gpu_and_annotations(event: dict) -> bool:
    """The events the viewer draws: GPU work, step/DataLoader/optimizer annotations, syncs,
    memory samples. Keeps a million-GPU-event trace to a few hundred MB of JSON."""
    cat = event.get("cat", "")
    name = str(event.get("name", ""))
    if cat in GPU_CATS or name == "[memory]":
        return True
    if event.get("ph") == "M":
        return True
    return name.startswith(("ProfilerStep#", "enumerate(DataLoader)", "Optimizer.",
                            "cudaDeviceSynchronize", "cudaStreamSynchronize"))


def tile_trace(src: Path, dst: Path, copies: int,
               keep: Callable[[dict], bool] | None = None) -> int:
    """Write `copies` back-to-back copies of src's events to dst (.json); return GPU events."""
    doc = read_events(src)
    events = [e for e in doc["traceEvents"] if keep is None or keep(e)]
    timed = [e for e in events if "ts" in e]
    lo = min(float(e["ts"]) for e in timed)
    hi = max(float(e["ts"]) + float(e.get("dur", 0) or 0) for e in timed)
    shift_by = (hi - lo) * 1.05
    steps = [int(m.group(1)) for e in events if (m := STEP_RE.match(str(e.get("name", ""))))]
    step_span = (max(steps) - min(steps) + 1) if steps else 0
    gpu = 0
    with open(dst, "w", encoding="utf-8") as out:
        out.write('{"traceEvents": [\n')
        first = True
        for k in range(copies):
            for e in events:
                if e.get("ph") == "M" and k:
                    continue
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = float(e2["ts"]) + k * shift_by
                m = STEP_RE.match(str(e2.get("name", "")))
                if m:
                    e2["name"] = f"ProfilerStep#{int(m.group(1)) + k * step_span}"
                if e2.get("cat") in GPU_CATS:
                    gpu += 1
                out.write(("" if first else ",\n") + json.dumps(e2))
                first = False
        out.write("\n],\n")
        rest = {key: v for key, v in doc.items() if key != "traceEvents"}
        out.write(json.dumps(rest)[1:] if rest else '"displayTimeUnit": "ms"}')
    return gpu
