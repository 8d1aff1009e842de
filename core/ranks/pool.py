"""Run rank tasks on a local process pool, sized by cores and memory; results stream back.

A worker process analyses one trace at a time, so a 128-rank folder never holds more than
`workers` traces in memory; the parent holds only the small summaries. Processes start from a
fork server that has already imported the analysis (Linux, macOS), else by spawn.

    job = run_local(tasks, workers, cancel, on_result)   # a core.jobs Job: yields (done, total)
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import struct
from collections.abc import Callable, Sequence
from multiprocessing.context import BaseContext
from pathlib import Path

from stallscope.core.errors import StallscopeError
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.ranks.tasks import RankFailure, RankSummary, analyze_rank
from stallscope.core.readers.source import available_memory

Result = RankSummary | RankFailure
Task = tuple[str, str]  # (label, path)
OnResult = Callable[[int, Result], None]  # (task index, result), as each one finishes

PEAK_PER_JSON_BYTE = 2.0       # a worker's peak memory per byte of trace JSON (load + analysis)
WORKER_BASE_BYTES = 150 << 20  # an interpreter with numpy, msgspec and the analysis imported
_POLL_S = 0.1
_PRELOAD = ["stallscope.core.ranks.tasks"]


def json_bytes(path: str | os.PathLike) -> int:
    """The uncompressed size of a trace file: gzip's trailer (mod 4 GiB, so at least twice the
    compressed size is assumed), else the file size; 0 when unreadable."""
    p = Path(path)
    try:
        size = p.stat().st_size
        with open(p, "rb") as f:
            if f.read(2) != b"\x1f\x8b":
                return size
            f.seek(-4, os.SEEK_END)
            isize: int = struct.unpack("<I", f.read(4))[0]
    except (OSError, struct.error):
        return 0
    while isize < 2 * size:
        isize += 1 << 32
    return isize


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def default_workers(paths: Sequence[str | os.PathLike]) -> int:
    """min(cores, tasks, what memory allows for the largest trace), at least 1."""
    if not paths:
        return 1
    largest = max(json_bytes(p) for p in paths)
    per_worker = int(largest * PEAK_PER_JSON_BYTE) + WORKER_BASE_BYTES
    by_memory = int(0.8 * available_memory()) // max(per_worker, 1)
    return max(1, min(cpu_count(), len(paths), by_memory))


def run_serial(tasks: Sequence[Task], cancel: CancelFlag | None = None,
               on_result: OnResult | None = None,
               device: int | None = None) -> Job[list[Result]]:
    """The same tasks one after another in this process (the baseline, and workers=1)."""
    cancel = cancel or CancelFlag()
    results: list[Result] = []
    yield 0, len(tasks)
    for i, (label, path) in enumerate(tasks):
        cancel.check()
        results.append(analyze_rank(path, label, device))
        if on_result is not None:
            on_result(i, results[-1])
        yield i + 1, len(tasks)
    return results


def run_local(tasks: Sequence[Task], workers: int | None = None,
              cancel: CancelFlag | None = None,
              on_result: OnResult | None = None,
              device: int | None = None) -> Job[list[Result]]:
    """Results in task order; `on_result` sees each as it finishes. Yields (done, total) while
    waiting, so a set cancel flag (or closing the job) stops it within ~0.1 s and ends the
    worker processes."""
    cancel = cancel or CancelFlag()
    workers = workers or default_workers([p for _, p in tasks])
    if workers <= 1 or len(tasks) <= 1:
        return (yield from run_serial(tasks, cancel, on_result, device))
    total = len(tasks)
    results: list[Result | None] = [None] * total
    pending = list(range(total))[::-1]  # popped from the end: task order
    done = 0
    pool = _pool(min(workers, total))
    running: dict[cf.Future, int] = {}
    lost: set[int] = set()  # tasks whose worker died once: a second death is theirs
    finished = False
    try:
        yield 0, total
        while pending or running:
            while pending and len(running) < 2 * workers:  # one queued per worker, no more
                i = pending.pop()
                label, path = tasks[i]
                running[pool.submit(analyze_rank, path, label, device)] = i
            ready, _ = cf.wait(running, timeout=_POLL_S, return_when=cf.FIRST_COMPLETED)
            cancel.check()
            retry = []
            for fut in ready:
                i = running.pop(fut)
                result: Result
                try:
                    result = fut.result()
                except cf.process.BrokenProcessPool:
                    if i not in lost:  # maybe another task's worker died: run it again
                        lost.add(i)
                        retry.append(i)
                        continue
                    result = RankFailure(tasks[i][0], tasks[i][1],
                                         f"{tasks[i][1]}: the worker process analysing it "
                                         "died twice (out of memory?)")
                results[i] = result
                if on_result is not None:
                    on_result(i, result)
                done += 1
            if retry or (ready and _broken(pool)):  # a fresh pool for what is left
                pending.extend(sorted(retry + list(running.values()), reverse=True))
                running.clear()
                _stop(pool)
                pool = _pool(min(workers, total))
            yield done, total
        finished = True
    finally:
        if finished:
            pool.shutdown(wait=True)
        else:
            _stop(pool)
    return results  # type: ignore[return-value]


def _context() -> BaseContext:
    methods = mp.get_all_start_methods()
    if "forkserver" in methods:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return mp.get_context("spawn")


def _pool(workers: int) -> cf.ProcessPoolExecutor:
    try:
        return cf.ProcessPoolExecutor(max_workers=workers, mp_context=_context())
    except (OSError, ValueError) as exc:
        raise StallscopeError(f"cannot start {workers} worker processes: {exc}") from None


def _broken(pool: cf.ProcessPoolExecutor) -> bool:
    return bool(getattr(pool, "_broken", False))


def _stop(pool: cf.ProcessPoolExecutor) -> None:
    """End the workers now (a cancelled job must not keep loading traces)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)

