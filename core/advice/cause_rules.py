"""One rule per idle cause (docs/definitions.md "Advice"): it fires when its cause holds >= 5% of
the window on a device (without a GPU: of step time), or is the largest cause of a GPU idle
>= 10% of the window. Each card quotes its numbers and can win back `saving_us`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stallscope.core import units
from stallscope.core.advice import fixes, line_rules
from stallscope.core.advice.registry import Context, rule
from stallscope.core.causes import CAUSES
from stallscope.core.kineto import Cat
from stallscope.core.lineprof import evidence as line_evidence
from stallscope.core.report import Advice, Culprit
from stallscope.core.units import duration, pct

SMALL_GAP_US = 20.0  # gpu_wait gaps shorter than this are back-to-back kernels
# dataloader_bound also needs a wait worth winning: at least 1 ms per step on average. Below
# that, handing a batch over from worker processes (pickling it through a queue, waking the
# main thread) costs about as much as it saves; 0.17 ms/step of in-memory indexing (issue 14)
# is no loader problem even at 10% of a short step.
DATALOADER_MIN_US_PER_STEP = 1000.0
CPU_COMPUTE_SHARE = 0.5  # without a GPU, CPU operators this share of step time: compute-bound

FIXES = {
    "small_kernels": (
        "Many tiny kernels run back to back: fuse them with torch.compile, or capture the step "
        "in a {graph} (torch.cuda.graphs / mode=\"reduce-overhead\")."),
    "stream_wait": (
        "Queued work waits on another stream, an event or a collective: overlap communication "
        "with compute, and check the stream dependencies (wait_stream, record_stream, events)."),
}

# cause -> (rule id, title with a GPU, title without (empty: no card without a GPU), what the
# threads did while the GPU idled, what the step time went to without a GPU)
CAUSE_RULES = {
    "data_loading": ("dataloader_bound", "The GPU waits for data", "Steps wait for data",
                     "the main thread waits on the DataLoader", "waiting on the DataLoader"),
    "sync": ("sync_stalls", "The loop waits on host-device synchronisation",
             "Steps wait on synchronisation",
             "the main thread or a launching thread is in {sync_calls}",
             "synchronize calls and blocking copies"),
    "optimizer": ("optimizer_bound", "The GPU waits for the optimizer step",
                  "The optimizer step takes a large share of each step",
                  "the main thread runs Optimizer.step / zero_grad",
                  "Optimizer.step / zero_grad"),
    "cpu_ops": ("host_bound", "The GPU waits for the CPU to launch work",
                "CPU operators take most of each step",
                "the main thread runs CPU ops and runtime calls",
                "CPU operators (the model's own compute)"),
    "backward": ("backward_bound", "The GPU waits for the backward launches", "",
                 "the autograd engine's threads launch backward (the main thread waits in "
                 "backward())", ""),
    "python": ("python_overhead", "The GPU waits while Python runs between ops",
               "Python between ops takes a large share of each step",
               "the main thread runs Python the profiler does not record",
               "Python (or other host code) the profiler does not record"),
}


def _evidence(ctx: Context, cause: str, dev: int | None, us: float) -> str:
    _rule_id, _t, _tc, what, what_cpu = CAUSE_RULES[cause]
    what = what.format(sync_calls=" / ".join(ctx.rt(n) for n in (
        "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaMemcpy")) + "-style calls")
    rank = ctx.rank_phrase(dev, cause)
    if dev is not None:
        stats = ctx.report.devices[dev]
        return (f"{ctx.label(dev)} idles {duration(us)} while {what}: {pct(ctx.share(us))} of "
                f"the {duration(ctx.base_us)} window, {rank} ({ctx.kind} utilization "
                f"{pct(stats.utilization)}).")
    steps = units.plural(ctx.n_steps, "step") if ctx.n_steps else "the window"
    return (f"{pct(ctx.share(us))} of step time ({duration(us)} of {duration(ctx.base_us)} "
            f"over {steps}) goes to {what_cpu}, {rank} (a CPU-only trace).")


def _card(ctx: Context, cause: str, fix: Callable[[list[Culprit]], str], extra: str = "",
          title: str | None = None) -> Advice | None:
    """The cause's card when it fires; `fix(culprits)` writes its fix from its culprits."""
    rule_id, title_gpu, title_cpu, _what, _what_cpu = CAUSE_RULES[cause]
    found = ctx.fires(cause)
    if found is None or (not ctx.gpu and not title_cpu):
        return None  # without a GPU, CPU ops and backward are the work itself
    dev, us = found
    culprits = ctx.culprits(cause)
    return Advice(rule_id, title or (ctx.titled(title_gpu) if ctx.gpu else title_cpu),
                  _evidence(ctx, cause, dev, us) + extra, fix(culprits), cause=cause,
                  focus=ctx.focus(cause, dev), saving_us=us, device=dev, culprits=culprits)


@rule("dataloader_bound")
def dataloader_bound(ctx: Context) -> Advice | None:
    found = ctx.fires("data_loading")
    if found is None:
        return None
    per_step = found[1] / max(ctx.n_steps, 1)
    if per_step < DATALOADER_MIN_US_PER_STEP:
        return None
    extra = f" That is {duration(per_step)} per step." if ctx.n_steps else ""
    said, loader_fix = fixes.dataloader_fix(ctx, ctx.culprits("data_loading"))
    extra += said
    if ctx.line_stats:
        extra += line_evidence(ctx.line_stats)
        hot = line_rules.hot_line(ctx.line_stats, ctx.gpu)
        tail = (f" Then fix the hottest line of __getitem__, which {hot.does} (its own card "
                "says how)." if hot is not None else
                " Speed up the hottest line of __getitem__ (the line heatmap), and convert "
                "decoded images once with the LMDB wizard (stallscope-cli convert).")
    else:
        tail = (" Find the slow line of Dataset.__getitem__ with the line heatmap "
                f"(stallscope-cli run {ctx.place}--lineprof auto -- {ctx.script}), and convert "
                "decoded images once with the LMDB wizard (stallscope-cli convert).")
    return _card(ctx, "data_loading", lambda _c: loader_fix + tail, extra)


@rule("sync_stalls")
def sync_stalls(ctx: Context) -> Advice | None:
    return _card(ctx, "sync", lambda c: fixes.sync_fix(ctx, c))


@rule("optimizer_bound")
def optimizer_bound(ctx: Context) -> Advice | None:
    return _card(ctx, "optimizer", lambda c: fixes.optimizer_fix(ctx, c))


@rule("host_bound")
def host_bound(ctx: Context) -> Advice | None:
    if not ctx.gpu:  # the ops are the work itself: a card only when they are most of it
        found = ctx.fires("cpu_ops")
        if found is None or ctx.share(found[1]) < CPU_COMPUTE_SHARE:
            return None
        return _card(ctx, "cpu_ops", lambda c: fixes.cpu_compute_fix(ctx, c))
    return _card(ctx, "cpu_ops", lambda c: fixes.launch_fix(ctx, c, "The CPU"))


@rule("backward_bound")
def backward_bound(ctx: Context) -> Advice | None:
    return _card(ctx, "backward", lambda c: fixes.launch_fix(ctx, c, "The autograd threads")
                 + " With DDP, a larger bucket_cap_mb and gradient_as_bucket_view=True.")


@rule("python_overhead")
def python_overhead(ctx: Context) -> Advice | None:
    found = ctx.fires("python")
    if found is None:
        return None
    dev = found[0]
    by = ctx.report.devices[dev].python_by_annotation if dev is not None \
        else ctx.report.host_python_by_annotation
    total = sum(by.values())
    named = [(name or "outside any annotation", us) for name, us in by.items() if us > 0][:3]
    parts = ", ".join(f"{n if n == 'outside any annotation' else repr(n)} {duration(us)} "
                      f"({pct(us / total if total else 0)})" for n, us in named)
    extra = f" Where: {parts}." if parts else ""
    wait = ctx.report.collective_wait
    if wait is not None and ctx.collectives_fire and wait.device == dev:
        extra += (f" Collectives on other threads covered {duration(wait.us)} more of the "
                  "main thread's unrecorded time: that part is communication (its own card).")
    frames = bool((ctx.report.trace.cat == Cat.PYTHON_FUNCTION).any())
    card = _card(ctx, "python", lambda c: fixes.python_fix(ctx, c, frames), extra)
    if card is not None and wait is not None and ctx.collectives_fire \
            and wait.device == dev:
        card.culprits = [c for c in card.culprits if c.kind != "collective"]
    return card


def _gpu_wait_split(ctx: Context) -> tuple[int, float, float, int, float] | None:
    """(device, gpu_wait µs, share in gaps < 20 µs, gaps, median gap µs) when gpu_wait fires."""
    found = ctx.fires("gpu_wait")
    if found is None:
        return None
    dev, us = found
    if dev is None:
        return None
    spans = ctx.report.devices[dev].spans_of("gpu_wait")
    lengths = spans[:, 1] - spans[:, 0]
    small = float(lengths[lengths < SMALL_GAP_US].sum())
    median = float(np.median(lengths)) if len(lengths) else 0.0
    return dev, us, small / us if us > 0 else 0.0, len(lengths), median


def _gpu_wait_card(ctx: Context, rule_id: str, title: str, small: bool) -> Advice | None:
    split = _gpu_wait_split(ctx)
    if split is None or (split[2] > 0.5) != small:
        return None
    dev, us, small_share, n, median = split
    stats = ctx.report.devices[dev]
    evidence = (f"{ctx.label(dev)} idles {duration(us)} in {units.plural(n, 'gap')} whose next "
                f"op was already launched: {pct(ctx.share(us))} of the {duration(ctx.base_us)} "
                f"window, {ctx.rank_phrase(dev, 'gpu_wait')}; {pct(small_share)} of it in gaps "
                f"under {SMALL_GAP_US:.0f} µs (median gap {duration(median)}; {ctx.kind} "
                f"utilization {pct(stats.utilization)}).")
    focus = ctx.report.worst_gap("gpu_wait", dev)
    if small:  # the longest small gap, widened: a tiny gap alone shows nothing
        spans = stats.spans_of("gpu_wait")
        tiny = spans[spans[:, 1] - spans[:, 0] < SMALL_GAP_US]
        mid = float(tiny[np.argmax(tiny[:, 1] - tiny[:, 0])].mean())
        lo, hi = ctx.report.window
        focus = (max(lo, mid - 100.0), min(hi, mid + 100.0))
    fix = FIXES[rule_id].format(graph=ctx.graph)
    if rule_id == "small_kernels" and fixes.compiled_fix(ctx, "The host"):
        fix = "Many tiny kernels run back to back. " + fixes.compiled_fix(ctx, "The host")
    return Advice(rule_id, ctx.titled(title), evidence, fix,
                  cause="gpu_wait", focus=focus, saving_us=us, device=dev,
                  culprits=ctx.culprits("gpu_wait"))


@rule("small_kernels")
def small_kernels(ctx: Context) -> Advice | None:
    return _gpu_wait_card(ctx, "small_kernels", "Many tiny kernels leave the GPU waiting between "
                          "them", small=True)


@rule("stream_wait")
def stream_wait(ctx: Context) -> Advice | None:
    return _gpu_wait_card(ctx, "stream_wait", "Queued GPU work waits on another stream, an event "
                          "or a collective", small=False)


assert set(CAUSE_RULES) | {"gpu_wait", "uncovered"} == set(CAUSES)
