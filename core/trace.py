"""Load a torch.profiler / Kineto trace into sorted numpy columns: the Trace.

Reading (core/readers/source.py: file kinds, gzip, the memory budget), decoding (a reader per
format, core/readers/) and packing columns (core/readers/columns.py) live in core/readers/; this
module holds the Trace and the entry points: `load`, `load_job`, `resolve`, `find_traces` (a
folder's traces as core/folder.py plans them).
Units: microseconds, float64, as in the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from stallscope.core import readers
from stallscope.core.errors import NoTraceInFolder, TraceError
from stallscope.core.folder import plan_folder
from stallscope.core.jobs import CancelFlag, Job, run_job
from stallscope.core.kineto import ACCELERATOR_RUNTIMES, GPU_CATS, Cat, is_step_name
from stallscope.core.readers.columns import MemorySamples, dropped_text, in_codes, in_ids
from stallscope.core.readers.head import rank_in_name
from stallscope.core.readers.heap import reusing_freed_memory
from stallscope.core.readers.source import MEMORY_FACTOR, available_memory, check_kind
from stallscope.core.readers.source import read_bytes as _read_bytes
from stallscope.core.units import mib

__all__ = ["Trace", "device_kind", "find_traces", "in_codes", "load", "load_job", "resolve",
           "unique"]

@dataclass
class Trace:
    path: Path
    names: list[str]
    start: np.ndarray     # float64 µs, sorted
    end: np.ndarray       # float64 µs, start + dur
    dur: np.ndarray       # float64 µs as written in the file (exact, unlike end - start)
    cat: np.ndarray       # int8 Cat
    name: np.ndarray      # int32 index into names
    track: np.ndarray     # int32 index into tracks
    device: np.ndarray    # int32, -1 for CPU events
    stream: np.ndarray    # int32, -1 where absent
    corr: np.ndarray      # int64 args.correlation (launch <-> GPU op), -1 where absent
    tracks: list[tuple[str, str]]
    mem: MemorySamples
    device_properties: list[dict] = field(default_factory=list)
    rank: int | None = None
    world_size: int | None = None
    dropped: dict[str, int] = field(default_factory=dict)
    # What the profiler named each thread (pid, tid as in tracks): "thread 639 (pt_autograd_0)"
    thread_names: dict[tuple[str, str], str] = field(default_factory=dict)
    # Metadata that was left out, each a sentence ("deviceProperties ignored (...)").
    notes: list[str] = field(default_factory=list)
    # The accelerator a trace without readable device activity came from, when its runtime or
    # device categories are there (device work stallscope does not analyse yet), else None.
    unanalysed_accelerator: str | None = None
    # What the device ids name: "GPU" (CUDA, ROCm), or the accelerator whose runtime the trace
    # holds ("MTIA", "XPU").
    device_kind: str = "GPU"

    @property
    def n_events(self) -> int:
        return len(self.start)

    def gpu_devices(self) -> list[int]:
        gpu = in_codes(self.cat, GPU_CATS)
        return sorted(int(d) for d in unique(self.device[gpu]))

    def device_label(self, dev: int) -> str:
        """A device for people: "GPU 0", "MTIA 17"."""
        return f"{self.device_kind} {dev}"

    def step_indices(self) -> np.ndarray:
        """CPU `ProfilerStep#<digits>` events, in time order (GPU repeats are ignored)."""
        steps = self.mask_names(is_step_name)
        steps &= (self.cat != Cat.GPU_USER_ANNOTATION) & (self.device < 0)
        return np.flatnonzero(steps)

    def name_ids(self, predicate) -> np.ndarray:
        """Ids of the interned names for which predicate(name) holds."""
        return np.array([i for i, n in enumerate(self.names) if predicate(n)], dtype=np.int32)

    def mask_names(self, predicate) -> np.ndarray:
        return in_ids(self.name, self.name_ids(predicate), len(self.names))


# ----------------------------------------------------------------------------- public entry points

def load(path: str | os.PathLike, cancel: CancelFlag | None = None) -> Trace:
    return run_job(load_job(path, cancel))


def find_traces(path: str | os.PathLike) -> list[Path]:
    """The traces of a folder as core/folder.py plans it: the ones `analyze` picks first, then
    the others newest first (by Kineto's stamp, then the trace's clock, then mtime); [] when
    it holds none."""
    root = Path(path)
    if not root.is_dir():
        check_kind(root)  # a FIFO or a device is named by kind, not taken for an empty folder
    try:
        return plan_folder(root).traces
    except NoTraceInFolder:
        return []


def resolve(path: str | os.PathLike) -> Path:
    """The one trace file a path stands for: itself, or the first trace core/folder.py picks in
    a folder (the one `analyze` reads; rank 0 of a job's ranks)."""
    p = Path(path)
    if not p.is_dir():
        check_kind(p)  # no such file; a FIFO, a device: refused by kind
        return p
    return plan_folder(p).picks[0][1]


def load_job(path: str | os.PathLike, cancel: CancelFlag | None = None) -> Job[Trace]:
    """Yields (done, 1000): reading 0-400, decoding 400-1000."""
    cancel = cancel or CancelFlag()
    p = resolve(path)
    try:
        with reusing_freed_memory():  # the text's pages become the columns' (readers/heap.py)
            data = yield from _read_bytes(p, cancel, readers.sniffer(p))
            yield 400, 1000
            decoded = yield from readers.decode(p, data, cancel)
            del data
            fields = decoded.cols.finish(decoded.device_properties)
    except MemoryError:
        raise TraceError(f"{p}: ran out of memory while loading (budget {mib(available_memory())}"
                         f", about {MEMORY_FACTOR}x the JSON size is needed)") from None
    trace = Trace(path=p, **fields, notes=decoded.notes)
    trace.device_properties = decoded.device_properties
    trace.device_kind = device_kind(getattr(decoded.cols, "cats", ()))
    trace.rank, trace.world_size = _rank_of(p, decoded.distributed_info)
    if trace.n_events == 0 and len(trace.mem) == 0:
        reason = dropped_text(trace.dropped, "; ")
        raise TraceError(f"{p}: no usable trace events" + (f" ({reason})" if reason else ""))
    return trace


def unique(values) -> np.ndarray:
    """np.unique(values) of a 1-D array, by one sort: numpy 2's hashing unique takes ~100x as
    long on the evenly spaced event indexes and ids the analysis collects (90k indexes: 0.1 s).
    Floats go to np.unique (one NaN for all NaNs)."""
    values = np.asarray(values)
    if values.dtype.kind not in "iub" or values.ndim != 1:
        return np.unique(values)
    out = np.sort(values)
    if len(out) > 1:
        new = np.empty(len(out), dtype=bool)
        new[0] = True
        np.not_equal(out[1:], out[:-1], out=new[1:])
        out = out[new]
    return out


def device_kind(categories) -> str:
    """"GPU", or the accelerator named by a runtime category among the trace's raw categories
    (mtia_runtime: "MTIA"; xpu_runtime: "XPU"; a PrivateUse1 runtime: "device")."""
    for cat in categories:
        name = ACCELERATOR_RUNTIMES.get(cat)
        if name:
            return "device" if name.startswith("a ") else name.split()[-1]
    return "GPU"


def _rank_of(p: Path, info) -> tuple[int | None, int | None]:
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        ws = info.get("world_size")
        return info["rank"], ws if isinstance(ws, int) else None
    return rank_in_name(p.name), None
