"""Kineto's vocabulary in one place: categories, the names that give an event its role.

Every module that asks "is this a step / a DataLoader wait / a sync / a cudaMalloc?" asks here.
Names cover current Kineto traces, the 2021 format (`Kernel`, `Memcpy`, `Operator`, `Runtime`) and
ROCm (hip*). Roles are set once, at load (core/trace.py), from these tables.
"""

from __future__ import annotations

import re
from enum import IntEnum


class Cat(IntEnum):
    CPU_OP = 0
    USER_ANNOTATION = 1
    GPU_USER_ANNOTATION = 2
    CUDA_RUNTIME = 3
    CUDA_DRIVER = 4
    KERNEL = 5
    GPU_MEMCPY = 6
    GPU_MEMSET = 7
    PYTHON_FUNCTION = 8
    OTHER = 9


GPU_CATS = (Cat.KERNEL, Cat.GPU_MEMCPY, Cat.GPU_MEMSET)
RUNTIME_CATS = (Cat.CUDA_RUNTIME, Cat.CUDA_DRIVER)
CPU_OP_CATS = (Cat.CPU_OP, Cat.CUDA_RUNTIME, Cat.CUDA_DRIVER)

CATEGORY_CODES = {
    "cpu_op": Cat.CPU_OP, "Operator": Cat.CPU_OP, "operator": Cat.CPU_OP,
    "user_annotation": Cat.USER_ANNOTATION,
    "gpu_user_annotation": Cat.GPU_USER_ANNOTATION,
    "cuda_runtime": Cat.CUDA_RUNTIME, "Runtime": Cat.CUDA_RUNTIME, "runtime": Cat.CUDA_RUNTIME,
    "cuda_driver": Cat.CUDA_DRIVER, "Driver": Cat.CUDA_DRIVER,
    "kernel": Cat.KERNEL, "Kernel": Cat.KERNEL,
    "gpu_memcpy": Cat.GPU_MEMCPY, "Memcpy": Cat.GPU_MEMCPY,
    "gpu_memset": Cat.GPU_MEMSET, "Memset": Cat.GPU_MEMSET,
    "python_function": Cat.PYTHON_FUNCTION,
}


def category(cat: str) -> int:
    return int(CATEGORY_CODES.get(cat, Cat.OTHER))


# Steps are CPU events named exactly ProfilerStep#<digits> (DESIGN.md).
STEP_PREFIX = "ProfilerStep#"
STEP_RE = re.compile(r"ProfilerStep#\d+")


def is_step_name(name: str) -> bool:
    return STEP_RE.fullmatch(name) is not None


DATALOADER_PREFIXES = ("enumerate(DataLoader)#", "enumerate(DataPipe)#")
OPTIMIZER_PREFIX = "Optimizer."
# 2021 traces file record_function ranges under `Operator`: these names are annotations.
ANNOTATION_PREFIXES = (STEP_PREFIX, *DATALOADER_PREFIXES, OPTIMIZER_PREFIX)
# The runner wraps backward() in this record_function; torchrec uses the second.
BACKWARD_ANNOTATIONS = frozenset({"stallscope#backward", "## backward ##"})

SYNC_NAMES = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
    "hipMemcpyWithStream",
})
MALLOC_NAMES = ("cudaMalloc", "hipMalloc")
FREE_NAMES = ("cudaFree", "hipFree")
PAGEABLE_H2D = "Memcpy HtoD (Pageable -> Device)"
COMM_PREFIXES = ("nccl", "rccl")  # matched case-insensitively
PROFILER_SPAN_CAT = "Trace"       # the profiler's own span, e.g. "PyTorch Profiler (0)"

CUDA_DEVICE_TYPE = 1  # `[memory]` args: Device Type 1 = CUDA, 0 = CPU

# The profiler's own span ("PyTorch Profiler (0)", cat `Trace`, which the loader files as
# Cat.OTHER): an OTHER event whose name starts so is left out of a step-less window.
PROFILER_SPAN_PREFIX = "PyTorch Profiler"


def is_comm_name(name: str) -> bool:
    """A communication kernel: nccl*/rccl* in any case (ncclKernel_*, ncclDevKernel_*)."""
    return name[:4].lower() in COMM_PREFIXES
