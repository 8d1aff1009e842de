"""The names the advice's detectors look for: collectives on CPU threads, Python frames,
graph capture, start-up calls. (Kineto's vocabulary; kept together so it can move into
core/kineto.py in one piece.)"""

from __future__ import annotations

import re
import sys

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
    if path.split("/")[0].removesuffix(".py") in STDLIB:  # Kineto shortens the stdlib's too
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
