"""Who is who in a trace: the steps, the main thread, the window, and the launch <-> GPU-op join.

docs/definitions.md: main thread, window, launching threads L(d).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stallscope.core import causes
from stallscope.core import intervals as iv
from stallscope.core.kineto import (
    AUTOGRAD_ENGINE_PREFIX,
    BACKWARD_ANNOTATIONS,
    CLOSURE_ANNOTATION,
    CLOSURE_SUFFIXES,
    CPU_OP_CATS,
    DATALOADER_PREFIXES,
    GPU_CATS,
    LOOP_PREFIXES,
    OPTIMIZER_PREFIX,
    RUNTIME_CATS,
    SYNC_NAMES,
    Cat,
    is_engine_thread,
)
from stallscope.core.trace import Trace, in_codes, unique


@dataclass
class Roles:
    """Masks and indexes over the trace's events, computed once per analysis."""

    steps: np.ndarray        # event indexes of the steps, in time order
    main: int | None         # the main thread's track
    lo: float
    hi: float
    gpu: np.ndarray          # mask: GPU ops of non-zero duration
    launch: np.ndarray       # per event: the index of its GPU op's launch event, -1 (GPU ops only)
    cpu_op: np.ndarray       # mask: operator / runtime / driver calls (the cpu_ops categories)
    sync: np.ndarray         # mask: events named like a blocking sync
    annotation: np.ndarray   # mask: user annotations (not steps)


def roles(trace: Trace) -> Roles:
    steps = trace.step_indices()
    main = main_track(trace, steps)
    lo, hi = window(trace, steps)
    gpu = in_codes(trace.cat, GPU_CATS) & (trace.dur > 0)
    annotation = (trace.cat == Cat.USER_ANNOTATION) & ~_step_mask(trace, steps)
    return Roles(
        steps=steps, main=main, lo=lo, hi=hi, gpu=gpu, launch=launch_index(trace, gpu),
        cpu_op=in_codes(trace.cat, CPU_OP_CATS),
        sync=trace.mask_names(lambda n: n in SYNC_NAMES), annotation=annotation)


def _step_mask(trace: Trace, steps: np.ndarray) -> np.ndarray:
    mask = np.zeros(trace.n_events, dtype=bool)
    mask[steps] = True
    return mask


def main_track(trace: Trace, steps: np.ndarray) -> int | None:
    """The first step's thread; without steps, the host thread the trace shows running the
    loop (docs/definitions.md "Main thread"): never an autograd engine thread (named so by
    the profiler, or mostly running the engine's evaluate_function); first one with
    Optimizer.* / DataLoader annotations, then the process's own thread (tid == pid) when it
    does a tenth of the busiest one's work, then one with Python frames; operator time (else
    runtime time) decides last."""
    if len(steps):
        return int(trace.track[steps[0]])
    ops = in_codes(trace.cat, CPU_OP_CATS) & (trace.device < 0)
    hosts = unique(trace.track[ops])
    if len(hosts) == 0:
        return None
    work = {int(k): _op_time(trace, ops, k) for k in hosts}
    engine = trace.mask_names(lambda n: n.startswith(AUTOGRAD_ENGINE_PREFIX))
    loop = trace.mask_names(lambda n: n.startswith(LOOP_PREFIXES))
    frames = trace.cat == Cat.PYTHON_FUNCTION
    busiest = max(work.values())

    def key(k: int) -> tuple[bool, bool, bool, bool, float, int]:
        mine = trace.track == k
        pid, tid = trace.tracks[k]
        looping = bool((loop & mine).any())
        named = trace.thread_names.get((pid, tid), "")
        is_engine = not looping and (is_engine_thread(named)
                                     or _engine_share(trace, engine & mine, k) >= 0.5)
        own = pid == tid and work[k] >= 0.1 * busiest
        return (not is_engine, looping, own, bool((frames & mine).any()), work[k], -k)

    return max(work, key=key)


def _op_time(trace: Trace, ops: np.ndarray, k: int) -> float:
    """The thread's operator time (the union of its ops), else its runtime time."""
    mine = ops & (trace.track == k)
    cpu = mine & (trace.cat == Cat.CPU_OP)
    return iv.length(iv.union(iv.as_intervals(trace.start[cpu], trace.end[cpu]))) if cpu.any() \
        else 1e-9 * iv.length(iv.union(iv.as_intervals(trace.start[mine], trace.end[mine])))


def _engine_share(trace: Trace, engine: np.ndarray, k: int) -> float:
    """How much of the thread's operator time is the autograd engine's evaluate_function."""
    if not engine.any():
        return 0.0
    cpu = (trace.cat == Cat.CPU_OP) & (trace.track == k)
    total = iv.length(iv.union(iv.as_intervals(trace.start[cpu], trace.end[cpu])))
    mine = iv.length(iv.union(iv.as_intervals(trace.start[engine], trace.end[engine])))
    return mine / total if total > 0 else 0.0


def window(trace: Trace, steps: np.ndarray) -> tuple[float, float]:
    """First step start to the latest step end; without steps, every event but the profiler's
    own span (category `Trace`, whatever its name)."""
    if len(steps):
        return float(trace.start[steps[0]]), float(trace.end[steps].max())
    keep = trace.cat != Cat.PROFILER
    if not keep.any():
        return 0.0, 0.0
    return float(trace.start[keep].min()), float(trace.end[keep].max())


def launch_index(trace: Trace, gpu: np.ndarray) -> np.ndarray:
    """For each GPU op, the runtime/driver event with the same args.correlation (the earliest
    when several share it), else -1; -1 for every other event. One sort and a searchsorted."""
    out = np.full(trace.n_events, -1, dtype=np.int64)
    runtime = np.flatnonzero(in_codes(trace.cat, RUNTIME_CATS)
                             & (trace.corr >= 0))
    ops = np.flatnonzero(gpu & (trace.corr >= 0))
    if len(runtime) == 0 or len(ops) == 0:
        return out
    runtime = runtime[np.argsort(trace.corr[runtime], kind="stable")]  # ties keep time order
    keys = trace.corr[runtime]
    want = trace.corr[ops]
    pos = np.minimum(np.searchsorted(keys, want, side="left"), len(keys) - 1)
    hit = keys[pos] == want
    out[ops[hit]] = runtime[pos[hit]]
    return out


def launch_tracks(trace: Trace, r: Roles, on_dev: np.ndarray) -> np.ndarray:
    """L(d): the threads owning a runtime/driver event whose args.correlation is that of a GPU
    op on the device (mask `on_dev`)."""
    ids = trace.corr[on_dev]
    ids = unique(ids[ids >= 0])
    if len(ids) == 0:
        return np.zeros(0, dtype=np.int64)
    runtime = in_codes(trace.cat, RUNTIME_CATS)
    owners = runtime & np.isin(trace.corr, ids)
    return unique(trace.track[owners]).astype(np.int64)


def union_of(trace: Trace, mask: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return iv.union(iv.clip(iv.as_intervals(trace.start[mask], trace.end[mask]), lo, hi))


def main_phases(trace: Trace, r: Roles) -> dict[str, np.ndarray]:
    """The main thread's unions, clipped to the window, per host cause (by name; sync and
    backward add the launching threads per device)."""
    out = {c: iv.EMPTY for c in causes.HOST_CAUSES}
    if r.main is None:
        return out
    on_main = trace.track == r.main
    lo, hi = r.lo, r.hi
    masks = {
        "data_loading": trace.mask_names(lambda n: n.startswith(DATALOADER_PREFIXES)),
        "sync": r.sync,
        "optimizer": trace.mask_names(lambda n: n.startswith(OPTIMIZER_PREFIX)),
        "cpu_ops": r.cpu_op,
        "backward": trace.mask_names(lambda n: n in BACKWARD_ANNOTATIONS),
    }
    out.update({c: union_of(trace, m & on_main & ~r.gpu, lo, hi) for c, m in masks.items()})
    # The forward and backward a closure runs inside Optimizer.step are not the optimizer (v3).
    out["optimizer"] = iv.subtract(out["optimizer"],
                                   union_of(trace, closure_mask(trace) & on_main, lo, hi))
    out["python"] = iv.clip(python_span(trace, r, on_main), lo, hi)
    return out


def closure_mask(trace: Trace) -> np.ndarray:
    """The runner's closure annotation, and user annotations named like a closure."""
    runner = trace.mask_names(lambda n: n == CLOSURE_ANNOTATION)
    named = trace.mask_names(lambda n: n.endswith(CLOSURE_SUFFIXES))
    mask: np.ndarray = runner | (named & (trace.cat == Cat.USER_ANNOTATION))
    return mask


def python_span(trace: Trace, r: Roles, on_main: np.ndarray) -> np.ndarray:
    """Where the main thread runs host code: inside its steps; without steps, from its first
    event's start to its last event's end."""
    steps = r.steps[trace.track[r.steps] == r.main]
    if len(r.steps):
        return iv.union(iv.as_intervals(trace.start[steps], trace.end[steps]))
    if not on_main.any():
        return iv.EMPTY
    return np.array([[trace.start[on_main].min(), trace.end[on_main].max()]])
