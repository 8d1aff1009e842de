"""GPU memory series per device from `[memory]` samples, and caching-allocator churn."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stallscope.core.intervals import as_intervals, longest
from stallscope.core.kineto import CUDA_DEVICE_TYPE, FREE_NAMES, MALLOC_NAMES, Cat
from stallscope.core.trace import Trace, unique


@dataclass
class MemoryStats:
    ts: np.ndarray              # µs
    allocated: np.ndarray       # bytes
    reserved: np.ndarray        # bytes; NaN where the trace records no totals (2021 format)
    peak_allocated: float | None
    peak_reserved: float | None
    reserved_drops: int
    drop_ts: np.ndarray         # where reserved memory shrank
    cuda_malloc_count: int = 0
    cuda_malloc_us: float = 0.0
    cuda_free_count: int = 0
    cuda_free_us: float = 0.0
    allocator_calls_in_steps: int = 0
    allocator_us_in_steps: float = 0.0
    longest_call_in_steps: tuple[float, float] | None = None
    has_totals: bool = field(default=False)

    def to_json(self) -> dict:
        return {
            "samples": int(len(self.ts)),
            "peak_allocated": self.peak_allocated,
            "peak_reserved": self.peak_reserved,
            "reserved_drops": self.reserved_drops,
            "cuda_malloc_count": self.cuda_malloc_count,
            "cuda_malloc_us": self.cuda_malloc_us,
            "cuda_free_count": self.cuda_free_count,
            "cuda_free_us": self.cuda_free_us,
            "allocator_calls_in_steps": self.allocator_calls_in_steps,
            "allocator_us_in_steps": self.allocator_us_in_steps,
            "source": "totals" if self.has_totals else "running sum of Bytes",
        }


def memory_by_device(trace: Trace, devices: list[int],
                     step_windows: np.ndarray) -> dict[int, MemoryStats]:
    """One entry per CUDA device that has samples or GPU activity."""
    mem = trace.mem
    cuda = mem.device_type == CUDA_DEVICE_TYPE
    sampled = sorted(int(d) for d in unique(mem.device_id[cuda]))
    calls = _allocator_calls(trace, step_windows)
    out = {}
    for dev in sorted(set(sampled) | set(devices)):
        sel = cuda & (mem.device_id == dev)
        out[dev] = _series(mem.ts[sel], mem.nbytes[sel], mem.total_allocated[sel],
                                mem.total_reserved[sel], calls)
    return out


def _series(ts: np.ndarray, nbytes: np.ndarray, total_alloc: np.ndarray, total_res: np.ndarray,
            calls: dict) -> MemoryStats:
    has_totals = len(ts) > 0 and bool(np.isfinite(total_alloc).all())
    allocated = total_alloc if has_totals else np.cumsum(nbytes)
    reserved = total_res if len(ts) and np.isfinite(total_res).all() else np.full(len(ts), np.nan)
    finite_res = np.isfinite(reserved)
    drops = np.zeros(len(ts), dtype=bool)
    if finite_res.all() and len(ts) > 1:
        drops[1:] = reserved[1:] < reserved[:-1]
    return MemoryStats(
        ts=ts, allocated=allocated, reserved=reserved,
        peak_allocated=float(allocated.max()) if len(ts) else None,
        peak_reserved=float(reserved[finite_res].max()) if finite_res.any() else None,
        reserved_drops=int(drops.sum()), drop_ts=ts[drops], has_totals=has_totals, **calls)


def _allocator_calls(trace: Trace, step_windows: np.ndarray) -> dict:
    runtime = (trace.cat == Cat.CUDA_RUNTIME) | (trace.cat == Cat.CUDA_DRIVER)
    malloc = runtime & trace.mask_names(lambda n: n in MALLOC_NAMES)
    free = runtime & trace.mask_names(lambda n: n in FREE_NAMES)
    both = np.flatnonzero(malloc | free)
    inside = np.zeros(len(both), dtype=bool)
    if len(both) and len(step_windows):
        starts = trace.start[both]
        i = np.searchsorted(step_windows[:, 0], starts, side="right") - 1
        inside = (i >= 0) & (starts < step_windows[np.maximum(i, 0), 1])
    dur = trace.dur
    calls = both[inside]
    return {
        "cuda_malloc_count": int(malloc.sum()), "cuda_malloc_us": float(dur[malloc].sum()),
        "cuda_free_count": int(free.sum()), "cuda_free_us": float(dur[free].sum()),
        "allocator_calls_in_steps": int(inside.sum()),
        "allocator_us_in_steps": float(dur[calls].sum()),
        "longest_call_in_steps": longest(as_intervals(trace.start[calls], trace.end[calls])),
    }
