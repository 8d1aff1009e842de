"""Kineto's vocabulary in one place: categories, the names that give an event its role.

Every module that asks "is this a step / a DataLoader wait / a sync / a cudaMalloc / a collective
on a CPU thread / the user's own Python frame / a graph capture?" asks here.
Names cover current Kineto traces, the 2021 format (`Kernel`, `Memcpy`, `Operator`, `Runtime`) and
ROCm (hip*). Roles are set once, at load (core/trace.py), from these tables.
"""

from __future__ import annotations

import re
import sys
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
    ACCELERATOR = 10  # device work of accelerators beside CUDA/ROCm kernels (see the end)
    PROFILER = 11     # category `Trace`: the profiler's own span, whatever its name
    RANGE = 12        # CUPTI's range profiler: one range per kernel, replayed (see the end)


GPU_CATS = (Cat.KERNEL, Cat.GPU_MEMCPY, Cat.GPU_MEMSET, Cat.ACCELERATOR, Cat.RANGE)
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
    "Trace": Cat.PROFILER,
}


def category(cat: str) -> int:
    return int(CATEGORY_CODES.get(cat, Cat.OTHER))


# Steps are CPU events named exactly ProfilerStep#<digits> (docs/definitions.md).
STEP_PREFIX = "ProfilerStep#"
STEP_RE = re.compile(r"ProfilerStep#\d+")


def is_step_name(name: str) -> bool:
    return STEP_RE.fullmatch(name) is not None


DATALOADER_PREFIXES = ("enumerate(DataLoader)#", "enumerate(DataPipe)#")
OPTIMIZER_PREFIX = "Optimizer."
# Closures run by Optimizer.step(closure) (docs/definitions.md, the optimizer cause): the
# runner's annotation, and user annotations ending so (Lightning's profiler:
# "[LightningModule]M.training_step", "[Strategy]DDPStrategy.backward"). Their time is
# compute, not the optimizer.
CLOSURE_ANNOTATION = "stallscope#closure"
CLOSURE_SUFFIXES = ("training_step", ".backward", "closure")
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
# Communication (docs/definitions.md): a GPU op whose lower-cased name contains one of these.
# DeepEP's dispatch/combine kernels live in `::internode::` / `::intranode::` namespaces.
COMM_SUBSTRINGS = ("nccl", "rccl", "nvshmem", "::internode::", "::intranode::",
                   "cross_device_reduce", "allreduce", "all_reduce", "allgather", "all_gather",
                   "reducescatter", "reduce_scatter", "alltoall", "all_to_all")
COMM_PREFIXES = ("nccl", "rccl")  # gui/lanes.py's until it calls is_comm_name
PROFILER_SPAN_CAT = "Trace"       # the profiler's own span, e.g. "PyTorch Profiler (0)"
# The autograd engine's per-op frames: a thread made mostly of them is an engine thread
# (pt_autograd_*), never the main thread. The main thread's loop shows in these annotations.
AUTOGRAD_ENGINE_PREFIX = "autograd::engine::evaluate_function"
# Metadata (`ph: "M"`): the profiler's name for a thread, e.g. "thread 639 (pt_autograd_0)";
# threads the engines run (autograd's per-device threads) never run the training loop
THREAD_NAME = "thread_name"
ENGINE_THREAD_MARKS = ("pt_autograd_",)


def is_engine_thread(name: str) -> bool:
    """A thread named as one of torch's engine threads (autograd's backward threads)."""
    return any(mark in name for mark in ENGINE_THREAD_MARKS)
LOOP_PREFIXES = (OPTIMIZER_PREFIX, *DATALOADER_PREFIXES)

CUDA_DEVICE_TYPE = 1  # `[memory]` args: Device Type 1 = CUDA, 0 = CPU

# The profiler's own span is every event of category `Trace` (Cat.PROFILER), whatever its name
# ("PyTorch Profiler (0)", libkineto's "Test trace (0)"): it is left out of a step-less window.


def is_comm_name(name: str) -> bool:
    """A communication op: one of COMM_SUBSTRINGS anywhere in its lower-cased name
    (`ncclDevKernel_AllReduce_*`, `void dpsk::ep::internode::dispatch<...>`)."""
    low = name.lower()
    return any(s in low for s in COMM_SUBSTRINGS)


# Other accelerators. Device work recorded in categories beside kernel/gpu_memcpy/gpu_memset is
# GPU activity (Cat.ACCELERATOR, in GPU_CATS): Meta MTIA's command-processor events, and CUPTI's
# range profiler, which records one range per kernel on the GPU instead of the kernel itself
# (Cat.RANGE: its timing is distorted by kernel replay, which the report says).
# Their runtimes' calls are launches, like cuda_runtime.
CATEGORY_CODES.update({
    "mtia_ccp_events": Cat.ACCELERATOR, "cuda_profiler_range": Cat.RANGE,
    "mtia_runtime": Cat.CUDA_RUNTIME, "xpu_runtime": Cat.CUDA_RUNTIME,
    "privateuse1_runtime": Cat.CUDA_RUNTIME, "privateuse1_driver": Cat.CUDA_DRIVER,
})
# A trace with one of these runtimes' calls but no device activity stallscope reads came from an
# accelerator stallscope does not analyse yet (Trace.unanalysed_accelerator names it).
ACCELERATOR_RUNTIMES = {"mtia_runtime": "MTIA", "xpu_runtime": "Intel XPU",
                        "privateuse1_runtime": "a PrivateUse1 device",
                        "privateuse1_driver": "a PrivateUse1 device"}
# Complete-event categories that are neither analysed nor a sign of unread device work.
KNOWN_OTHER_CATS = frozenset({"", PROFILER_SPAN_CAT, "overhead", "cpu_instant_event",
                              "external_correlation", "cuda_sync", "python_function"})
# Device events that are waits, not work (like CUDA's cuda_sync records): the device idles on
# another stream's event. They are not GPU activity (the loader files them as Cat.OTHER).
DEVICE_WAIT_NAMES = frozenset({"event_wait"})  # mtia_ccp_events


# What the advice's detectors look for: collectives on CPU threads, Python frames, graph
# capture, start-up calls.

# Collectives as CPU events (any category, any thread): gloo's, c10d's and NCCL's op ranges and
# the profiler's record_param_comms. On a CPU-only DDP rank they run on gloo's own threads.
COLLECTIVE_PREFIXES = ("gloo:", "c10d::", "nccl:", "rccl:")
COLLECTIVE_NAMES = frozenset({"record_param_comms"})


def is_collective_name(name: str) -> bool:
    return name.startswith(COLLECTIVE_PREFIXES) or name in COLLECTIVE_NAMES


# Python frames (cat python_function, with_stack): "train.py(45): step",
# "torch/nn/modules/module.py(1501): _call_impl", "<built-in method item ...>", "nn.Module: X".
FRAME_RE = re.compile(r"^(?P<file>[^<][^()]*)\((?P<line>\d+)\): (?P<func>.+)$")
# Installed code: a package directory, a Python's own library, or torch itself (Kineto writes
# paths under sys.path relative to it, so torch's frames read "torch/...").
# ... and code torch.compile generated (inductor's cache: /tmp/torchinductor_<user>/...).
INSTALLED_RE = re.compile(r"(site-packages|dist-packages)/|/lib/python\d+(\.\d+)?/|^torch/"
                          r"|torchinductor_")


STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
# Libraries a training script runs under, by top-level module: Kineto shortens their paths to
# "triton/knobs.py", which reads like the user's package otherwise.
LIBRARY_MODULES = frozenset({
    "torch", "triton", "torchvision", "torchaudio", "torchtext", "torchrec", "fbgemm_gpu",
    "torchdata", "functorch", "transformers", "accelerate", "datasets", "tokenizers",
    "huggingface_hub", "safetensors", "peft", "trl", "diffusers", "timm", "lightning",
    "pytorch_lightning", "lightning_fabric", "deepspeed", "megatron", "apex", "xformers",
    "flash_attn", "bitsandbytes", "vllm", "sglang", "numpy", "scipy", "pandas", "sklearn",
    "PIL", "cv2", "einops", "hydra", "omegaconf", "wandb", "tqdm", "tensorboard", "jax"})


def is_frame_name(name: str) -> bool:
    """A source frame (file and line), not a built-in call or a module marker."""
    return FRAME_RE.match(name) is not None


def frame_tier(name: str) -> int:
    """How surely a frame is the user's own code: 2 a script beside the entry point (a bare
    file name) or an absolute path outside installed packages; 1 a relative path under some
    sys.path entry (a package: the user's, or an installed one Kineto shortened); 0 installed
    (site-packages, dist-packages, Python's library, torch) or not a source frame."""
    m = FRAME_RE.match(name)
    if m is None or INSTALLED_RE.search(m.group("file")):
        return 0
    path = m.group("file")
    top = path.split("/")[0].removesuffix(".py")
    if top in STDLIB or top in LIBRARY_MODULES:  # Kineto shortens these paths too
        return 0
    return 2 if "/" not in path or path.startswith("/") else 1


# CUDA/HIP graph capture: cudaStreamBeginCapture / hipStreamBeginCapture (and the driver's
# cuStreamBeginCapture) up to the graph's instantiation.
CAPTURE_BEGIN = "StreamBeginCapture"
CAPTURE_END = ("GraphInstantiate", "StreamEndCapture")
# Compilation in Python frames (torch.compile's dynamo and inductor, triton's JIT).
# Only the compiling entry points: dynamo's eval_frame wrappers also run around every
# DistributedDataParallel.forward without compiling anything.
COMPILE_FRAME_RE = re.compile(r"torch/_dynamo/convert_frame\.py|torch/_inductor/compile_fx\.py|"
                              r"torch/_inductor/codecache\.py|triton/compiler/")
# Calls that block by design: a long one is a sync, not start-up.
BLOCKING_RE = re.compile(r"Synchronize|Memcpy|Wait|Query")
# Kernel launches (cudaLaunchKernel, cuLaunchKernelEx, hipExtLaunchKernel, hipModuleLaunchKernel,
# cudaLaunchCooperativeKernel): each should have its kernel in the trace.
LAUNCH_RE = re.compile(r"Launch\w*Kernel")
# Code that already runs compiled: torch.compile's regions (forward `CompiledFunction`, its
# backward `CompiledFunctionBackward`, `Torch-Compiled Region: 0/0`) and graph replays
# (cudaGraphLaunch, hipGraphLaunch, cuGraphLaunch).
COMPILED_PREFIXES = ("CompiledFunction", "Torch-Compiled Region")
GRAPH_LAUNCH_RE = re.compile(r"GraphLaunch")
# Collective kinds by a substring of the lower-cased GPU kernel name (first match wins). NCCL
# runs all-to-all as grouped send/recv: a `sendrecv` kernel is all-to-all when the CPU side
# names one (nccl:all_to_all, c10d::alltoall_base_), pipeline send/recv when it names those.
COLLECTIVE_KINDS = (("all_reduce", ("allreduce", "all_reduce")),
                    ("all_gather", ("allgather", "all_gather")),
                    ("reduce_scatter", ("reducescatter", "reduce_scatter")),
                    ("all_to_all", ("alltoall", "all_to_all", "::internode::", "::intranode::")),
                    ("send_recv", ("sendrecv", "send", "recv")))
ALL_TO_ALL_CPU = ("all_to_all", "alltoall")
SEND_RECV_CPU = ("nccl:send", "nccl:recv", "c10d::send", "c10d::recv")
