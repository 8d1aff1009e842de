"""What the run's interpreter offers: torch, CUDA devices, this process's memory."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from .exits import SetupError

if TYPE_CHECKING:
    from types import ModuleType


def import_torch() -> ModuleType:
    try:
        import torch
        import torch.profiler  # noqa: F401
    except ImportError as exc:
        raise SetupError(
            f"the interpreter {sys.executable} has no torch ({exc}); install torch into it or "
            "choose an interpreter that has it (--python; on a host, --remote-python)"
        ) from None
    return torch


def torch_info(torch: ModuleType) -> dict:
    info = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "cuda_available": bool(torch.cuda.is_available()), "devices": []}
    if info["cuda_available"]:
        info["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


_STATM: list[int] = []  # an fd on this process's /proc/<pid>/statm, kept open: 2 µs a read


def read_rss() -> int | None:
    try:
        if not _STATM:
            _STATM[:] = [os.open(f"/proc/{os.getpid()}/statm", os.O_RDONLY),
                         os.sysconf("SC_PAGE_SIZE")]
        return int(os.pread(_STATM[0], 64, 0).split()[1]) * _STATM[1]
    except (OSError, ValueError, IndexError):
        try:
            import resource
            scale = 1 if sys.platform == "darwin" else 1024
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
        except (ImportError, OSError):
            return None
