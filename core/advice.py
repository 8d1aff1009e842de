"""Advice rules (DESIGN.md "Advice rules"): each fires on numbers and carries them as evidence."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from stallscope.core.analysis import Advice, DeviceStats
from stallscope.core.causes import CAUSE_LABELS, CAUSES
from stallscope.core.kineto import PAGEABLE_H2D, Cat
from stallscope.core.lineprof.heaviest import advice_evidence

if TYPE_CHECKING:
    from stallscope.core.analysis import Report

DATALOADER_SHARE = 0.10
SYNC_SHARE = 0.05
LOW_UTILIZATION = 0.50

FIXES = {
    "dataloader_bound": (
        "Feed the GPU faster: DataLoader(num_workers=<cores>, persistent_workers=True, "
        "pin_memory=True, prefetch_factor=4). Run the line heatmap on your Dataset.__getitem__ "
        "to find the slow line, and convert decoded images once with the LMDB wizard "
        "(stallscope-cli convert)."),
    "pageable_h2d": (
        "Copy from pinned memory: DataLoader(pin_memory=True) and "
        "batch.to(device, non_blocking=True)."),
    "host_bound": (
        "The CPU cannot launch work fast enough: use bigger batches, fewer small ops, "
        "CUDA graphs or torch.compile."),
    "sync_stalls": (
        "Avoid host-device syncs inside the loop: no .item(), .cpu(), .numpy() or printing "
        "tensors every step; accumulate on the GPU and read back every N steps."),
    "allocator_churn": (
        "Stop the caching allocator from giving memory back: set "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, keep shapes fixed (pad or bucket "
        "variable-length inputs)."),
    "low_utilization": (
        "The GPU has too little work per step: raise the batch size, use mixed precision "
        "(torch.autocast) to do more per second."),
}


def advise(report: Report) -> list[Advice]:
    out: list[Advice] = []
    for rule in (_dataloader_bound, _pageable_h2d, _host_bound, _sync_stalls, _allocator_churn):
        advice = rule(report)
        if advice is not None:
            out.append(advice)
    if not out:
        low = _low_utilization(report)
        if low is not None:
            out.append(low)
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _ms(us: float) -> str:
    return f"{us / 1000:,.1f} ms" if us >= 100 else f"{us:,.1f} µs"


def _largest_cause(stats: DeviceStats) -> str | None:
    if stats.idle_us <= 0:
        return None
    cause = max(CAUSES, key=lambda c: stats.idle_by_cause[c])
    return cause if stats.idle_by_cause[cause] > 0 else None


def _device_with_most(report: Report, cause: str) -> tuple[str, DeviceStats] | None:
    if not report.devices:
        return None
    return max(report.devices.items(), key=lambda kv: kv[1].idle_by_cause[cause])


def _dataloader_bound(report: Report) -> Advice | None:
    width = report.window_us
    if width <= 0:
        return None
    if report.devices:
        for dev, stats in report.devices.items():
            share = stats.idle_by_cause["data_loading"] / width
            if _largest_cause(stats) == "data_loading" and share >= DATALOADER_SHARE:
                return Advice(
                    "dataloader_bound", "The GPU waits for data",
                    f"GPU {dev} idles {_ms(stats.idle_by_cause['data_loading'])} while the main "
                    f"thread waits on the DataLoader: {_pct(share)} of the "
                    f"{_ms(width)} window, the largest idle cause "
                    f"(GPU utilization {_pct(stats.utilization)})."
                    + advice_evidence(report.trace.path),
                    FIXES["dataloader_bound"], cause="data_loading",
                    focus=report.worst_gap("data_loading", dev))
        return None
    # No GPU activity: judge by the share of step time spent waiting for data.
    total = sum(s.dur_us for s in report.steps)
    waiting = sum(s.data_loading_us for s in report.steps)
    if total > 0 and waiting / total >= DATALOADER_SHARE:
        return Advice(
            "dataloader_bound", "Steps wait for data",
            f"{_pct(waiting / total)} of step time ({_ms(waiting)} of {_ms(total)} over "
            f"{len(report.steps)} steps) is spent waiting on the DataLoader "
            "(no GPU activity in this trace)." + advice_evidence(report.trace.path),
            FIXES["dataloader_bound"], cause="data_loading",
            focus=_longest(report.phases["data_loading"]))
    return None


def _pageable_h2d(report: Report) -> Advice | None:
    trace = report.trace
    lo, hi = report.window
    pageable = (trace.cat == Cat.GPU_MEMCPY) & trace.mask_names(lambda n: PAGEABLE_H2D in n)
    pageable &= (trace.start < hi) & (trace.end > lo)
    n = int(pageable.sum())
    if n == 0:
        return None
    us = float((trace.end[pageable] - trace.start[pageable]).sum())
    k = int(np.flatnonzero(pageable)[np.argmax(trace.end[pageable] - trace.start[pageable])])
    return Advice(
        "pageable_h2d", "Host-to-device copies come from pageable memory",
        f"{n} host-to-device copies from pageable memory took {_ms(us)} on the GPU "
        f"in the window; pageable copies cannot overlap with compute.",
        FIXES["pageable_h2d"], focus=(float(trace.start[k]), float(trace.end[k])))


def _host_bound(report: Report) -> Advice | None:
    for dev, stats in report.devices.items():
        if _largest_cause(stats) == "cpu_ops":
            cpu = stats.idle_by_cause["cpu_ops"]
            return Advice(
                "host_bound", "The GPU waits for the CPU to launch work",
                f"GPU {dev} idles {_ms(cpu)} ({_pct(cpu / report.window_us)} of the window) "
                f"while the main thread runs CPU ops: the largest idle cause "
                f"(utilization {_pct(stats.utilization)}).",
                FIXES["host_bound"], cause="cpu_ops", focus=report.worst_gap("cpu_ops", dev))
    return None


def _sync_stalls(report: Report) -> Advice | None:
    found = _device_with_most(report, "sync")
    if found is None:
        return None
    dev, stats = found
    share = stats.idle_by_cause["sync"] / report.window_us
    if share < SYNC_SHARE:
        return None
    return Advice(
        "sync_stalls", "The loop waits on host-device synchronisation",
        f"GPU {dev} idles {_ms(stats.idle_by_cause['sync'])} ({_pct(share)} of the window) "
        "while the main thread is in cudaDeviceSynchronize / cudaStreamSynchronize / "
        "cudaMemcpy-style calls.",
        FIXES["sync_stalls"], cause="sync", focus=report.worst_gap("sync", dev))


def _allocator_churn(report: Report) -> Advice | None:
    lo, hi = report.window
    for dev, mem in report.memory.items():
        drops_in = int(((mem.drop_ts >= lo) & (mem.drop_ts <= hi)).sum())
        calls = mem.allocator_calls_in_steps
        if drops_in == 0 and calls == 0:
            continue
        parts = []
        if drops_in:
            parts.append(f"reserved memory on GPU {dev} shrank {drops_in} times in the window")
        if calls:
            parts.append(f"{calls} cudaMalloc/cudaFree calls ran inside steps "
                         f"({mem.cuda_malloc_count} cudaMalloc, {_ms(mem.cuda_malloc_us)}; "
                         f"{mem.cuda_free_count} cudaFree, {_ms(mem.cuda_free_us)})")
        focus = None
        if drops_in:
            t = float(mem.drop_ts[(mem.drop_ts >= lo) & (mem.drop_ts <= hi)][0])
            focus = (max(lo, t - 1000.0), min(hi, t + 1000.0))
        return Advice("allocator_churn", "The caching allocator keeps going back to cudaMalloc",
                      "; ".join(parts).capitalize() + ".", FIXES["allocator_churn"], focus=focus)
    return None


def _low_utilization(report: Report) -> Advice | None:
    for dev, stats in report.devices.items():
        if stats.utilization < LOW_UTILIZATION:
            cause = _largest_cause(stats)
            detail = (f"; the largest idle share is {CAUSE_LABELS[cause]} "
                      f"({_ms(stats.idle_by_cause[cause])})") if cause else ""
            return Advice(
                "low_utilization", "The GPU is mostly idle",
                f"GPU {dev} is busy {_pct(stats.utilization)} of the {_ms(report.window_us)} "
                f"window{detail}.",
                FIXES["low_utilization"], cause=cause,
                focus=report.worst_gap(cause, dev) if cause else None)
    return None


def _longest(spans: np.ndarray) -> tuple[float, float] | None:
    if len(spans) == 0:
        return None
    k = int(np.argmax(spans[:, 1] - spans[:, 0]))
    return float(spans[k, 0]), float(spans[k, 1])
