"""The idle causes: their priority order, codes, labels and descriptions (docs/definitions.md).

Every idle microsecond of a device goes to the first cause in CAUSES that covers it. A cause is
known by its `code` (a name: "data_loading"); the analysis builds each cause's intervals in a
dict keyed by code and paints them in this order, so a cause's place here is only its priority.
Arrays of painted pieces store `index(code)` (its position in CAUSES) per piece.
Adding a cause: a line here, its intervals under its code (core/analysis/threads.py for the
main thread's, idle.py for the device's), its colour in gui/colors.py, its rule in advice.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cause:
    code: str
    label: str        # short, for legends and tables: "data loading"
    phrase: str       # in a sentence: "GPU idle 44%, mostly <phrase>"
    description: str  # what the GPU was waiting for, for tooltips and the README
    if_gone: str      # the ceiling's condition: "up to 1.9x faster <if_gone>"
    if_gone_cpu: str  # the same on a trace without a GPU (step time of the main thread)
    host: bool = True  # something the main thread does (also charged on traces without a GPU)


CAUSE_LIST = (
    Cause("gpu_wait", "queued work", "queued work waiting on the GPU",
          "the next GPU op was already launched: it waited on another stream, an event, "
          "a collective or GPU work the trace lacks",
          "if queued GPU work never waited (on streams, events or collectives)",
          "if queued GPU work never waited", host=False),
    Cause("data_loading", "data loading", "data loading",
          "the main thread waited on the DataLoader",
          "if the GPU never waited for data", "if steps never waited for data"),
    Cause("sync", "sync", "CPU-GPU syncs",
          "the host blocked on a synchronize or a blocking copy",
          "if the loop never blocked on a CPU-GPU sync", "if steps never blocked on a sync"),
    Cause("optimizer", "optimizer", "the optimizer step",
          "the main thread was in Optimizer.step / zero_grad",
          "if the GPU never waited for the optimizer step",
          "if the optimizer step took no time"),
    Cause("cpu_ops", "CPU ops", "CPU-side ops",
          "the main thread was in an operator or a runtime call",
          "if the GPU never waited for CPU-side ops", "if CPU ops took no time"),
    Cause("backward", "backward", "backward on the autograd threads",
          "the autograd engine's threads were launching backward",
          "if the GPU never waited for the backward launches",
          "if backward took no time"),
    Cause("python", "Python", "Python between ops",
          "the main thread ran Python or other host code the profiler does not record",
          "if the GPU never waited for Python between ops",
          "if Python between ops took no time"),
    Cause("uncovered", "uncovered", "unattributed gaps",
          "nothing recorded explains it",
          "if the unattributed gaps vanished", "if the unattributed time vanished", host=False),
)

CAUSES = tuple(c.code for c in CAUSE_LIST)
REST = "uncovered"  # what no cause covers: the remainder, so the causes add up to idle
HOST_CAUSES = tuple(c.code for c in CAUSE_LIST if c.host)
BY_CODE = {c.code: c for c in CAUSE_LIST}


def label(code: str) -> str:
    return BY_CODE[code].label if code in BY_CODE else code.replace("_", " ")


def index(code: str) -> int:
    return CAUSES.index(code)
