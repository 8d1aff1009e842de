"""Run rank tasks on an existing Dask cluster (`pip install stallscope[cluster]`).

The workers read the traces themselves, so the paths must name storage they share (an NFS or
Lustre mount seen at the same path); only the small summaries travel back. Same tasks, same
summaries, same JSON as the local pool.

    job = run_dask(tasks, "tcp://HOST:8786", cancel, on_result)
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from stallscope.core.errors import StallscopeError
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.ranks.pool import OnResult, Result, Task
from stallscope.core.ranks.tasks import RankFailure, analyze_rank

CONNECT_TIMEOUT_S = 20
_POLL_S = 0.1


def _distributed():
    try:
        import distributed
    except ImportError:
        raise StallscopeError("--scheduler needs Dask: pip install 'stallscope[cluster]' "
                              "(dask and distributed)") from None
    return distributed


def run_dask(tasks: Sequence[Task], scheduler: str, cancel: CancelFlag | None = None,
             on_result: OnResult | None = None,
             device: int | None = None) -> Job[list[Result]]:
    """Results in task order; yields (done, total) while the cluster works."""
    cancel = cancel or CancelFlag()
    distributed = _distributed()
    try:
        client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise StallscopeError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    total = len(tasks)
    results: list[Result | None] = [None] * total
    futures = []
    try:
        futures = client.map(analyze_rank, [p for _, p in tasks], [lb for lb, _ in tasks],
                             [device] * total, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        finished = distributed.as_completed(futures, loop=client.loop)
        done = 0
        yield 0, total
        while done < total:
            batch = finished.next_batch(block=False)
            if not batch:
                cancel.check()
                time.sleep(_POLL_S)
                yield done, total
                continue
            for fut in batch:
                i = index[fut.key]
                result = results[i] = _result(fut, tasks[i])
                if on_result is not None:
                    on_result(i, result)
                done += 1
            cancel.check()
            yield done, total
    finally:
        if futures and any(r is None for r in results):
            client.cancel(futures)
        client.close()
    return results  # type: ignore[return-value]


def _result(fut, task: Task) -> Result:
    label, path = task
    if fut.status == "finished":
        return fut.result()
    try:
        exc = fut.exception()
    except Exception as err:  # noqa: BLE001 - the cluster lost the task: say so for this rank
        exc = err
    return RankFailure(label, path, f"{path}: the Dask task failed: {type(exc).__name__}: {exc}")
