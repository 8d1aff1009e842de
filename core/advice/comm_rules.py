"""Collectives on other threads: the main thread's unrecorded time while gloo / c10d / NCCL
collectives run on other threads is communication (a CPU-only DDP rank waits on gloo's
threads), carded with the collectives' names and shares instead of as Python."""

from __future__ import annotations

from stallscope.core.advice.registry import Context, rule
from stallscope.core.report import Advice, Culprit
from stallscope.core.units import duration, pct

FIX_GPU = ("Overlap communication with compute: with DDP a larger bucket_cap_mb and "
           "gradient_as_bucket_view=True, no_sync() on gradient-accumulation micro-batches; "
           "issue fewer, larger collectives.")
FIX_CPU = ("The step waits on gloo's collectives: all-reduce fewer, larger buckets "
           "(DDP bucket_cap_mb), skip it on accumulation micro-batches (model.no_sync()), and "
           "give gloo a fast interface (GLOO_SOCKET_IFNAME) or more threads; on GPUs, NCCL.")


@rule("collective_wait")
def collective_wait(ctx: Context) -> Advice | None:
    if not ctx.collectives_fire:
        return None
    wait = ctx.report.collective_wait
    assert wait is not None  # collectives_fire is False without one
    names = ", ".join(f"{n} {duration(us)} ({pct(us / wait.us)})"
                      for n, us in list(wait.by_name.items())[:3])
    threads = ", ".join(f"tid {tid}" for _pid, tid in wait.threads[:4])
    base = (f"the {duration(ctx.base_us)} window" if ctx.gpu
            else f"{duration(ctx.base_us)} of step time")
    who = f"{ctx.label(wait.device)} idles and the" \
        if ctx.gpu and wait.device is not None else "The"  # a GPU trace gives the wait a device
    evidence = (f"{who} main thread waits {duration(wait.us)} ({pct(ctx.share(wait.us))} of "
                f"{base}) in no recorded op while collectives run on "
                f"{len(wait.threads)} other thread{'s' if len(wait.threads) != 1 else ''} "
                f"({threads}): {names}. That time is communication, not Python.")
    # the python cause's culprits count the collectives; the overlap is this card's own
    counted = {c.name: c.count for c in ctx.culprits("python") if c.kind == "collective"}
    culprits = [Culprit(n, "collective", counted.get(n, 0), us)
                for n, us in list(wait.by_name.items())[:3]]
    return Advice("collective_wait",
                  "The step waits on collectives running on other threads",
                  evidence, FIX_GPU if ctx.gpu else FIX_CPU, cause="python",
                  focus=ctx.focus("python", wait.device), saving_us=wait.us,
                  device=wait.device, culprits=culprits)
