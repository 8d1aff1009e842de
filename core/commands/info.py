"""`stallscope-cli info TRACE`: what the file holds."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np

from stallscope.core.folder import plan_folder
from stallscope.core.kineto import Cat
from stallscope.core.render.facts import write_json
from stallscope.core.trace import load, resolve
from stallscope.core.units import count, duration, plural


def register(sub) -> None:
    p = sub.add_parser("info", help="what a trace holds: events, devices, steps, ranks, span",
                       description="Show what a trace holds: events by category, memory samples, "
                                   "devices, steps, rank, time span, and what the loader left "
                                   "out (dropped events, ignored metadata).")
    p.add_argument("trace", help="trace file, TensorBoard log dir or session folder")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=run)


def summarize(path) -> dict:
    t = load(path)
    cats = Counter({Cat(int(c)).name.lower(): int(n)
                    for c, n in zip(*np.unique(t.cat, return_counts=True), strict=True)})
    steps = t.step_indices()
    span = (float(t.start.min()), float(t.end.max())) if t.n_events else (0.0, 0.0)
    return {
        "trace": str(t.path),
        "events": t.n_events,
        "by_category": dict(cats.most_common()),
        "memory_samples": len(t.mem),
        "gpu_devices": t.gpu_devices(),
        "device_kind": t.device_kind,
        "device_names": sorted({str(d.get("name")) for d in t.device_properties if "name" in d}),
        "steps": [t.names[i] for i in t.name[steps]],
        "rank": t.rank,
        "world_size": t.world_size,
        "threads": len(t.tracks),
        "span_us": [span[0], span[1]],
        "dropped_events": dict(t.dropped),
        "notes": list(t.notes),
        "unanalysed_accelerator": t.unanalysed_accelerator,
    }


def run(args) -> int:
    if Path(args.trace).is_dir():  # one plan: the trace `analyze` reads, then the others
        plan = plan_folder(args.trace)
        info = summarize(plan.picks[0][1])
        info["traces_in_folder"] = [str(p) for p in plan.traces]
    else:
        info = summarize(resolve(args.trace))
    if args.json:
        write_json(info, sys.stdout)
        return 0
    print(f"trace      {info['trace']}")
    print(f"events     {plural(info['events'], 'complete event')}, "
          f"{plural(info['memory_samples'], 'memory sample')}")
    for cat, n in info["by_category"].items():
        print(f"  {cat:<20}{count(n):>10}")
    # device ids, not a count: "devices    0, 1 (GPU)"
    devs = f"{', '.join(map(str, info['gpu_devices']))} ({info['device_kind']})" \
        if info["gpu_devices"] else (
            f"none analysed: from {info['unanalysed_accelerator']}, an accelerator stallscope "
            "does not analyse yet" if info["unanalysed_accelerator"] else
            "none (no GPU activity)")
    print(f"devices    {devs}" + (f"  [{', '.join(info['device_names'])}]"
                                  if info["device_names"] else ""))
    steps = info["steps"]
    print(f"steps      {count(len(steps))}" + (
        f": {steps[0]} .. {steps[-1]}" if len(steps) > 1 else f": {steps[0]}" if steps else ""))
    if info["rank"] is not None:
        print(f"rank       {info['rank']}" + (f" of {info['world_size']}"
                                               if info["world_size"] else ""))
    lo, hi = info["span_us"]
    tracks = plural(info["threads"], "thread/stream", "threads/streams")
    print(f"span       {duration(hi - lo)} over {tracks}")
    for p in info.get("traces_in_folder", [])[1:]:
        print(f"also       {p}")
    if info["dropped_events"]:
        print("dropped    " + ", ".join(f"{count(n)} {why}"
                                        for why, n in info["dropped_events"].items()))
    for note in info["notes"]:
        print(f"note       {note}")
    return 0
