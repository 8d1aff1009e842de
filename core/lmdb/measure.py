"""How much faster the LMDB reads than the original pipeline, measured the way training reads:
a plain DataLoader loop with the default collate, shuffled, the same batch size and workers as
the reader snippet, page cache cold and then warm.

    t = run_job(measure(dst))                 # workers and batch size chosen (suggest_loader)
    t.after.samples_per_s, t.speedup, t.cold_speedup, t.num_workers, t.batch_size

Cold: the LMDB's data.mdb and the source files the cold pass will read are dropped from the
page cache with posix_fadvise(POSIX_FADV_DONTNEED) first (no root needed; pages that another
process has mapped stay, so a cold figure can only be too warm, never too cold).
Worker start-up is left out: each clock starts at a pass's first batch.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from stallscope.core.errors import StallscopeError
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.decoder import Decoder, source_desc
from stallscope.core.lmdb.errors import SampleError, SourceError
from stallscope.core.lmdb.folder import FolderSource
from stallscope.core.lmdb.images import Preprocess, preprocess_image
from stallscope.core.lmdb.listing import stored_source
from stallscope.core.lmdb.source import open_source
from stallscope.core.lmdb.structure import rebuild

MIN_SECONDS = 2.0  # per warm pass: below ~1 s the figures of one LMDB varied 2x run to run
FEW_SAMPLES = 1000  # below this, caveat(): the figures time a few batches over and over
MAX_SAMPLES = 100_000


@dataclass
class Rate:
    name: str
    samples: int
    seconds: float
    nbytes: int

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / 1e6 / self.seconds if self.seconds > 0 else 0.0


@dataclass
class Throughput:
    before: Rate  # the original pipeline, warm
    after: Rate  # LMDBDataset, warm
    num_workers: int
    batch_size: int
    before_cold: Rate | None = None
    after_cold: Rate | None = None
    tried_workers: dict[int, float] = field(default_factory=dict)  # num_workers -> LMDB samples/s
    collate: str = "default collate"  # or "collate_fn=list": samples of different shapes
    samples_in_lmdb: int = 0  # how many distinct samples the figures read (caveat())

    @property
    def speedup(self) -> float:
        return _ratio(self.after, self.before)

    @property
    def cold_speedup(self) -> float | None:
        if self.before_cold is None or self.after_cold is None:
            return None
        return _ratio(self.after_cold, self.before_cold)

    def caveat(self) -> str:
        """Why the figures say little about a real dataset ('' when nothing stands out)."""
        n = self.samples_in_lmdb
        if not n or n >= FEW_SAMPLES:
            return ""
        batches = -(-n // max(self.batch_size, 1))
        return (f"caveat: only {n:,} samples ({batches:,} batch(es) of {self.batch_size}): the "
                "cold figures time one short epoch and the warm ones read the same samples "
                "again and again, so start-up and caching weigh more than on a real dataset; "
                f"measure {FEW_SAMPLES:,} samples or more before deciding")

    def verdict(self) -> str:
        """'12.3x faster' or '0.4x: 2.5x slower', never a slowdown worded as a speed-up."""
        return speed_words(self.speedup)


def speed_words(ratio: float) -> str:
    if ratio >= 1.05:
        return f"{ratio:,.1f}x faster"
    if ratio <= 0.95 and ratio > 0:
        return f"{1 / ratio:,.1f}x slower"
    return "about the same speed"


def _ratio(a: Rate, b: Rate) -> float:
    return a.samples_per_s / b.samples_per_s if b.samples_per_s > 0 else float("inf")


def suggest_loader(sample_bytes: float, cores: int | None = None) -> tuple[int, int]:
    """(num_workers, batch_size) to start from: batches of about 1 MiB (32..512 samples);
    workers: none on up to 2 cores for samples under 64 KiB (reading one costs a few µs, less
    than handing it through a worker's pipe: on 2 cores 0 workers read 16x16 images ~2x
    faster than 2), else one per core up to 8. --measure tries 0 and the cores and keeps
    the faster."""
    cores = cores or os.cpu_count() or 1
    batch = 32
    while batch < 512 and batch * 2 * max(sample_bytes, 1) <= (1 << 20):
        batch *= 2
    small = sample_bytes < (64 << 10)
    workers = 0 if cores <= 1 or (cores <= 2 and small) else min(8, cores)
    return workers, batch


class SourceDataset:
    """The original pipeline: decode the source (PIL for images) in every __getitem__.

    Holds only the spec, so it pickles into spawn workers and reopens the source there.
    """

    def __init__(self, spec: str, preprocess: dict, structure: dict, source=None) -> None:
        self.spec, self.preprocess, self.structure = spec, preprocess, structure
        self._pid: int | None = None
        self._decoder: Decoder | None = None
        self._source = source if source is not None else open_source(spec)
        self._n = len(self._source)

    def __len__(self) -> int:
        return self._n

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _pid=None, _decoder=None)

    def __getitem__(self, index: int):
        import torch

        if self._pid != os.getpid() or self._decoder is None:
            self._decoder = Decoder(source_desc(self._source), self.preprocess, self.structure)
            self._pid = os.getpid()
        try:
            _, _, leaves = self._decoder.sample(self._source.task(index, index + 1)[0])
        except SampleError:
            return None  # a corrupt source file: the collate leaves it out
        values: list = []
        for kind, _dtype, arr in leaves:
            if kind in ("image", "tensor"):
                values.append(torch.from_numpy(np.array(arr)))
            elif kind in ("int", "float", "bool"):
                values.append(arr.item())
            elif kind == "str":
                values.append(arr.tobytes().decode("utf-8", "surrogatepass"))
            else:
                values.append(arr)
        return rebuild(self.structure, iter(values))

    def files(self, indices) -> list[str]:
        if not isinstance(self._source, FolderSource):
            return []
        return [str(self._source.root / self._source.files[i]) for i in indices]


class PlainImageFolder:
    """The "before" of an image folder: the loop a user writes without stallscope,
    torchvision's ImageFolder(root, transform=PILToTensor()) (with Resize/CenterCrop when the
    conversion had them) spelled out: PIL opens and decodes each file in __getitem__, the
    tensor is a CHW view of its HWC bytes, the default collate stacks the batch."""

    def __init__(self, source: FolderSource, preprocess: dict) -> None:
        self.paths = [str(source.root / f) for f in source.files]
        self.labels = None if source.labels is None else [int(v) for v in source.labels]
        self.pre = Preprocess.from_dict(preprocess)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int):
        import torch

        try:
            with open(self.paths[index], "rb") as f:  # torchvision's pil_loader
                opened = Image.open(f)
                img = opened.convert("RGB") if self.pre.rgb else opened.copy()
        except (OSError, ValueError, Image.DecompressionBombError):
            return None  # the conversion skipped it too: the collate leaves it out
        img = preprocess_image(img, self.pre)
        arr = np.array(img, copy=True)
        tensor = torch.from_numpy(arr.reshape(arr.shape[0], arr.shape[1], -1)).permute(2, 0, 1)
        return tensor if self.labels is None else (tensor, self.labels[index])

    def files(self, indices) -> list[str]:
        return [self.paths[i] for i in indices]


def before_dataset(dst, meta: dict) -> PlainImageFolder | SourceDataset:
    """What --measure compares the LMDB with: a folder's plain ImageFolder + PIL loop, a
    factory's own dataset (decoded as the conversion reads it)."""
    source = _stored_source(dst, meta)
    if source is None:
        source = open_source(meta["source"]["spec"])
    if isinstance(source, FolderSource):
        return PlainImageFolder(source, meta["preprocess"])
    return SourceDataset(meta["source"]["spec"], meta["preprocess"], meta["structure"], source)


def collate(items):
    """The default collate, leaving out None (the original pipeline's unreadable files)."""
    from torch.utils.data import default_collate

    items = [it for it in items if it is not None]
    return default_collate(items) if items else []


def collate_list(items):
    """For samples of different shapes (nothing to stack): the batch as a list."""
    return [it for it in items if it is not None]


def measure(
    dst: str | os.PathLike,
    num_workers: int | None = None,
    batch_size: int | None = None,
    seconds: float = MIN_SECONDS,
    max_samples: int = MAX_SAMPLES,
    cold: bool = True,
    cancel: CancelFlag | None = None,
) -> Job[Throughput]:
    """Before/after samples/s and MB/s with the same DataLoader settings (shuffled, like
    training), cold then warm. num_workers/batch_size default to suggest_loader()'s, which the
    reader snippet uses too. Needs torch."""
    try:
        import torch
    except ImportError:
        raise StallscopeError("measuring throughput needs torch (pip install torch)") from None
    after_ds = LMDBDataset(dst, readahead=None)
    meta = after_ds.meta
    sample_bytes = _sample_bytes(after_ds)
    workers, batch = suggest_loader(sample_bytes)
    batch = batch if batch_size is None else max(1, int(batch_size))
    batch = min(batch, max(1, len(after_ds) // 4))  # a few batches per epoch at least
    stackable = same_shapes(after_ds)
    n_samples = len(after_ds)
    after_ds.close()
    tried: dict[int, float] = {}
    cores = os.cpu_count() or 1
    if num_workers is not None:
        workers = max(0, int(num_workers))
    elif cores > 1:  # 0 or one per core, whichever reads this LMDB faster (warm)
        for w in sorted({0, workers, min(8, cores)}):
            loader = _loader(torch, LMDBDataset(dst), w, batch, None if stackable else collate_list)
            try:
                rate = yield from _rate(loader, "LMDBDataset", 50, max_samples, seconds / 2,
                                        0, 1, cancel, not stackable)  # fmt: skip
            finally:
                _shutdown(loader)
            tried[w] = rate.samples_per_s
        workers = max(tried, key=tried.__getitem__)
    try:
        before_ds = before_dataset(dst, meta)
    except StallscopeError as exc:
        raise StallscopeError(f"cannot measure the original pipeline: {exc}") from exc
    fn = collate if stackable else collate_list
    before_name = ("ImageFolder + PIL" if isinstance(before_ds, PlainImageFolder)
                   else "original (decode per sample)")
    passes: list[tuple[str, object, Callable | None]] = [(before_name, before_ds, fn)]
    passes.append(("LMDBDataset", LMDBDataset(dst), None if stackable else collate_list))
    phases = (2 if cold else 1) * len(passes)
    rates: dict[tuple[str, bool], Rate] = {}
    step = 0
    for name, ds, fn_ in passes:
        loader = _loader(torch, ds, workers, batch, fn_)
        try:
            if cold:
                files = before_ds.files(range(min(len(before_ds), 2 * MAX_SAMPLES)))
                _drop_cache(dst, files if ds is before_ds else [])
                rate = yield from _rate(loader, name, 1, max_samples, 2 * seconds, step,
                                        phases, cancel, not stackable)  # fmt: skip
                if rate.samples:  # else one batch is all there is: nothing to time cold
                    rates[name, True] = rate
                step += 1
            rates[name, False] = yield from _rate(loader, name, 50, max_samples, seconds,
                                                  step, phases, cancel, not stackable)  # fmt: skip
            step += 1
        finally:
            _shutdown(loader)
            if isinstance(ds, LMDBDataset):
                ds.close()
    names = [p[0] for p in passes]
    if rates[names[0], False].samples == 0 or rates[names[1], False].samples == 0:
        raise StallscopeError(f"{dst}: too few samples to time")
    return Throughput(
        rates[names[0], False], rates[names[1], False], workers, batch,
        rates.get((names[0], True)), rates.get((names[1], True)), tried,
        "default collate" if stackable else "collate_fn=list", n_samples,
    )  # fmt: skip


def _stored_source(dst, meta: dict):
    """The folder a conversion listed (from the LMDB; no scan), else None (open it)."""
    if meta["source"]["kind"] != "folder" or "listing" not in meta:
        return None
    ds = LMDBDataset(dst)
    try:
        return stored_source(ds)
    except SourceError:
        return None
    finally:
        ds.close()


def _sample_bytes(ds: LMDBDataset) -> float:
    if len(ds) == 0:
        return 1.0
    picks = np.linspace(0, len(ds) - 1, num=min(len(ds), 16)).astype(int)
    return float(np.mean([sum(a.nbytes for a in ds.arrays(int(i))[1]) for i in picks]))


def same_shapes(ds: LMDBDataset, k: int = 64) -> bool:
    """Whether every sample's fields have one shape and dtype (a batch stacks): from what the
    converter counted over every record, else from a spread of k samples."""
    if len(ds) == 0:
        return True
    found = ds.meta.get("survey")
    if isinstance(found, dict) and found.get("exact") is True:
        varied = found.get("varied")
        if isinstance(varied, bool):
            return not varied
    picks = np.linspace(0, len(ds) - 1, num=min(len(ds), k)).astype(int)
    shapes = {tuple((a.shape, a.dtype.str) for a in ds.arrays(int(i))[1]) for i in picks}
    return len(shapes) == 1


def _loader(torch, ds, workers: int, batch: int, collate_fn):
    from torch.utils.data import DataLoader

    context = None
    if workers > 0 and threading.active_count() > 1:
        context = "spawn"  # never fork a process that runs other threads (the GUI)
    kwargs = {} if collate_fn is None else {"collate_fn": collate_fn}
    return DataLoader(
        ds, batch_size=batch, shuffle=True, num_workers=workers,
        generator=torch.Generator().manual_seed(0), multiprocessing_context=context,
        persistent_workers=workers > 0, **kwargs,
    )  # fmt: skip


def _shutdown(loader) -> None:
    it = getattr(loader, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()


def _rate(loader, name, epochs, max_samples, seconds, step, phases, cancel, listed):
    """One timed pass: `epochs` epochs at most (1: a cold pass reads each sample at most
    once), stopping at max_samples or `seconds` after the first batch."""
    samples = nbytes = 0
    t0 = None
    for _epoch in range(epochs):
        for batch in loader:
            if t0 is None:  # the clock starts once workers are up
                t0 = time.perf_counter()
                continue
            samples += len(batch) if listed else _batch_len(batch)
            nbytes += sum(t.numel() * t.element_size() for t in _tensors(batch))
            elapsed = time.perf_counter() - t0
            frac = max(samples / max_samples, elapsed / seconds)
            yield int(1000 * (step + min(frac, 1.0))), 1000 * phases
            if cancel is not None:
                cancel.check()
            if samples >= max_samples or elapsed >= seconds:
                break
        if t0 is None or samples >= max_samples or time.perf_counter() - t0 >= seconds:
            break
    if t0 is None:
        raise StallscopeError(f"{name}: no batch could be read")
    return Rate(name, samples, time.perf_counter() - t0, nbytes)


def _batch_len(batch) -> int:
    first = batch
    while isinstance(first, list | tuple) and first:
        first = first[0]
    if isinstance(first, dict):
        first = next(iter(first.values()))
    return len(first) if hasattr(first, "__len__") else 1


def _drop_cache(dst, files: list[str]) -> None:
    """posix_fadvise(DONTNEED) on the LMDB's files and the given source files."""
    root = os.fspath(dst)
    paths = [os.path.join(root, "data.mdb")] if os.path.isdir(root) else [root]
    for path in paths + files:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _tensors(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, list | tuple):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)
