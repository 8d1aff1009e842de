"""Rules that are not one idle cause: pageable copies, allocator churn, exposed communication."""

from __future__ import annotations

import numpy as np

from stallscope.core import intervals as iv
from stallscope.core import units
from stallscope.core.advice import fixes
from stallscope.core.advice.registry import CAUSE_SHARE, Context, rule
from stallscope.core.intervals import longest
from stallscope.core.kineto import PAGEABLE_H2D, Cat
from stallscope.core.report import Advice
from stallscope.core.units import duration, pct

PAGEABLE_SHARE = 0.005  # pageable host-to-device copies worth 0.5% of the window

FIXES = {
    "pageable_h2d": (
        "Copy from pinned memory: DataLoader(pin_memory=True) and "
        "batch.to(device, non_blocking=True). Try it without editing the script: "
        "stallscope-cli run {place}--set pin_memory=true -- {script}."),
    "allocator_churn": (
        "Stop the caching allocator from giving memory back: set "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, keep shapes fixed (pad or bucket "
        "variable-length inputs)."),
}


@rule("pageable_h2d")
def pageable_h2d(ctx: Context) -> Advice | None:
    trace, (lo, hi) = ctx.report.trace, ctx.report.window
    pageable = (trace.cat == Cat.GPU_MEMCPY) & (trace.dur > 0)
    pageable &= trace.mask_names(lambda n: PAGEABLE_H2D in n)
    best = None
    for dev in ctx.report.devices:
        on = pageable & (trace.device == dev)
        spans = iv.clip(iv.as_intervals(trace.start[on], trace.end[on]), lo, hi)
        us = iv.length(iv.union(spans))
        if len(spans) and (best is None or us > best[1]):
            best = (dev, us, spans)
    if best is None or best[1] < PAGEABLE_SHARE * ctx.base_us:
        return None
    dev, us, spans = best
    return Advice(
        "pageable_h2d", "Host-to-device copies come from pageable memory",
        f"{units.plural(len(spans), 'host-to-device copy', 'host-to-device copies')} from "
        f"pageable memory took {duration(us)} on {ctx.label(dev)}, {pct(ctx.share(us))} of the "
        f"{duration(ctx.base_us)} window; pageable copies cannot overlap with compute.",
        FIXES["pageable_h2d"].format(script=ctx.script, place=ctx.place), focus=longest(spans),
        saving_us=us,
        device=dev,
        culprits=ctx.culprits("pageable_h2d"))


@rule("allocator_churn")
def allocator_churn(ctx: Context) -> Advice | None:
    lo, hi = ctx.report.window
    for dev, mem in ctx.report.memory.items():
        drops = mem.drop_ts[(mem.drop_ts >= lo) & (mem.drop_ts <= hi)]
        calls = mem.allocator_calls_in_steps
        if len(drops) == 0 and calls == 0:
            continue
        parts = []
        if len(drops):
            parts.append(f"reserved memory on {ctx.label(dev)} shrank "
                         f"{units.plural(len(drops), 'time')} in the window")
        if calls:
            malloc, free = ctx.rt("cudaMalloc"), ctx.rt("cudaFree")
            where = "inside steps" if ctx.n_steps else "in the window (no steps recorded)"
            parts.append(f"{units.plural(calls, f'{malloc}/{free} call')} ran {where}, "
                         f"{duration(mem.allocator_us_in_steps)} in all "
                         f"({units.count(mem.cuda_malloc_count)} {malloc}, "
                         f"{duration(mem.cuda_malloc_us)}; {units.count(mem.cuda_free_count)} "
                         f"{free}, {duration(mem.cuda_free_us)} "
                         "over the whole trace)")
        focus = mem.longest_call_in_steps
        if focus is None:
            t = float(drops[0])
            focus = (max(lo, t - 1000.0), min(hi, t + 1000.0))
        evidence = "; ".join(parts) + "."
        fix = FIXES["allocator_churn"]
        if ctx.rocm:
            fix = fix.replace("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")
        return Advice("allocator_churn", "The caching allocator keeps going back to "
                      + ctx.rt("cudaMalloc"),
                      evidence[0].upper() + evidence[1:], fix, focus=focus,
                      saving_us=mem.allocator_us_in_steps, device=dev)
    return None


@rule("exposed_comm")
def exposed_comm(ctx: Context) -> Advice | None:
    if not ctx.gpu:
        return None
    dev, stats = max(ctx.report.devices.items(), key=lambda kv: (kv[1].exposed_comm_us, kv[0]))
    us = stats.exposed_comm_us
    if ctx.base_us <= 0 or us < CAUSE_SHARE * ctx.base_us:
        return None
    steps = ctx.report.steps
    per_step = (f"; {duration(float(np.mean([s.exposed_comm_us[dev] for s in steps])))} "
                "per step") if steps else ""
    return Advice(
        "exposed_comm", "Communication is not hidden behind compute",
        f"{ctx.label(dev)} runs communication kernels for {duration(stats.comm_us)}, of which "
        f"{duration(us)} ({pct(ctx.share(us))} of the {duration(ctx.base_us)} window) with no "
        f"compute beside them: overlap {pct(stats.comm_overlap)}{per_step}.",
        fixes.comm_fix(ctx, ctx.culprits("exposed_comm")), focus=longest(stats.exposed_comm),
        saving_us=us, device=dev,
        culprits=ctx.culprits("exposed_comm"))
