"""The idle causes: their priority order, codes, labels and descriptions (DESIGN.md v2).

Every idle microsecond of a device goes to the first cause in CAUSES that covers it; a cause's code
is its index here. Adding a cause: a line here, its colour in gui/colors.py, its rule in advice.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cause:
    code: str
    label: str        # short, for legends and tables: "data loading"
    phrase: str       # in a sentence: "GPU idle 44%, mostly <phrase>"
    description: str  # what the GPU was waiting for, for tooltips and the README


CAUSE_LIST = (
    Cause("gpu_wait", "queued work", "queued work waiting on the GPU",
          "the next GPU op was already launched: it waited on another stream, an event, "
          "a collective or GPU work the trace lacks"),
    Cause("data_loading", "data loading", "data loading",
          "the main thread waited on the DataLoader"),
    Cause("sync", "sync", "CPU-GPU syncs",
          "the host blocked on a synchronize or a blocking copy"),
    Cause("optimizer", "optimizer", "the optimizer step",
          "the main thread was in Optimizer.step / zero_grad"),
    Cause("cpu_ops", "CPU ops", "CPU-side ops",
          "the main thread was in an operator or a runtime call"),
    Cause("backward", "backward", "backward on the autograd threads",
          "the autograd engine's threads were launching backward"),
    Cause("python", "Python", "Python between ops",
          "the main thread ran Python or other host code the profiler does not record"),
    Cause("uncovered", "uncovered", "unattributed gaps",
          "nothing recorded explains it"),
)

CAUSES = tuple(c.code for c in CAUSE_LIST)
BY_CODE = {c.code: c for c in CAUSE_LIST}
CAUSE_LABELS = {c.code: c.label for c in CAUSE_LIST}


def label(code: str) -> str:
    return BY_CODE[code].label if code in BY_CODE else code.replace("_", " ")


def index(code: str) -> int:
    return CAUSES.index(code)
