"""Check a converted LMDB against its source, and measure the speed-up it buys.

verify():  decode a random sample of the source again and compare it byte for byte with what
           LMDBDataset returns (needs no torch for image folders; uses torch when present).
measure(): samples/s and MB/s of the original pipeline (decode in __getitem__, in a DataLoader)
           against LMDBDataset in the same DataLoader settings (needs torch).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from stallscope.core.errors import StallscopeError
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.lmdb.dataset import LMDBDataset, _rebuild
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.source import (
    Decoder,
    SampleError,
    SourceError,
    flatten,
    open_source,
    source_desc,
)


@dataclass
class VerifyResult:
    checked: int
    mismatches: list[str] = field(default_factory=list)
    problem: str = ""  # why nothing could be checked (source gone, ...)
    count: int = 0
    skipped: int = 0
    source_count: int = 0

    @property
    def ok(self) -> bool:
        return self.checked > 0 and not self.mismatches and not self.problem

    def summary(self) -> str:
        if self.problem:
            return f"not verified: {self.problem}"
        if self.mismatches:
            n = len(self.mismatches)
            return f"{n} of {self.checked} checked samples differ from the source"
        return (
            f"{self.checked} random samples identical to the source, byte for byte "
            f"({self.count} stored + {self.skipped} skipped = {self.source_count} in the source)"
        )


def verify(
    dst: str | os.PathLike, n: int = 64, seed: int = 0, cancel: CancelFlag | None = None
) -> Job[VerifyResult]:
    ds = LMDBDataset(dst)
    try:
        return (yield from _verify(ds, n, seed, cancel))
    finally:
        ds.close()


def _verify(ds: LMDBDataset, n: int, seed: int, cancel) -> Job[VerifyResult]:
    meta = ds.meta
    result = VerifyResult(0, count=len(ds), source_count=int(meta["source"]["count"]))
    try:
        source = open_source(meta["source"]["spec"])
    except SourceError as exc:
        result.problem = f"the source cannot be opened ({exc})"
        return result
    if source.fingerprint() != meta["source"]["fingerprint"]:
        result.problem = f"{source.spec} changed since it was converted"
        return result
    from stallscope.core.lmdb.convert import read_skipped

    result.skipped = len(read_skipped(ds.env))
    if result.count + result.skipped != result.source_count:
        result.mismatches.append(
            f"{result.count} stored + {result.skipped} skipped != {result.source_count} in source"
        )
    decoder = Decoder(source_desc(source), meta["preprocess"], meta["structure"])
    torch = _torch()
    picks = np.sort(np.random.default_rng(seed).choice(len(ds), min(n, len(ds)), replace=False))
    for done, k in enumerate(picks.tolist()):
        src_index, stored = ds.arrays(k)
        try:
            _, _, leaves = decoder.sample(source.task(src_index, src_index + 1)[0])
        except SampleError as exc:
            result.mismatches.append(f"sample {k} (source {src_index}): source now fails: {exc}")
            continue
        expected = [a for _kind, _d, a in leaves]
        problem = _compare(expected, stored)
        if not problem and torch is not None:
            _, returned = flatten(ds[k], Preprocess(rgb=False))
            problem = _compare(expected, [a for _kind, _d, a in returned], "reader ")
        if problem:
            result.mismatches.append(f"sample {k} ({source.name_of(src_index)}): {problem}")
        result.checked += 1
        yield done + 1, len(picks)
        if cancel is not None:
            cancel.check()
    return result


def _compare(expected: list[np.ndarray], got: list[np.ndarray], who: str = "") -> str:
    if len(expected) != len(got):
        return f"{who}{len(got)} fields, source has {len(expected)}"
    for i, (a, b) in enumerate(zip(expected, got, strict=True)):
        if a.shape != b.shape:
            return f"field {i}: {who}shape {b.shape}, source {a.shape}"
        if a.dtype.itemsize != b.dtype.itemsize or a.tobytes() != b.tobytes():
            return f"field {i}: {who}bytes differ from the source decode"
    return ""


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


# ----------------------------------------------------------------------------- throughput


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
    before: Rate
    after: Rate
    num_workers: int
    batch_size: int

    @property
    def speedup(self) -> float:
        b = self.before.samples_per_s
        return self.after.samples_per_s / b if b > 0 else float("inf")


class SourceDataset:
    """The original pipeline: decode the source (PIL for images) in every __getitem__.

    Holds only the spec, so it pickles into spawn workers and reopens the source there.
    """

    def __init__(self, spec: str, preprocess: dict, structure: dict) -> None:
        self.spec, self.preprocess, self.structure = spec, preprocess, structure
        self._pid = None
        self._source = self._decoder = None
        self._n = len(open_source(spec))

    def __len__(self) -> int:
        return self._n

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _pid=None, _source=None, _decoder=None)

    def __getitem__(self, index: int):
        import torch

        if self._pid != os.getpid():
            self._source = open_source(self.spec)
            self._decoder = Decoder(source_desc(self._source), self.preprocess, self.structure)
            self._pid = os.getpid()
        _, _, leaves = self._decoder.sample(self._source.task(index, index + 1)[0])
        values = []
        for kind, _dtype, arr in leaves:
            if kind in ("image", "tensor"):
                values.append(torch.from_numpy(np.array(arr)))
            elif kind in ("int", "float", "bool"):
                values.append(arr.item())
            elif kind == "str":
                values.append(arr.tobytes().decode())
            else:
                values.append(arr)
        return _rebuild(self.structure, iter(values))


def measure(
    dst: str | os.PathLike,
    num_workers: int = 0,
    batch_size: int = 32,
    seconds: float = 2.0,
    max_samples: int = 4000,
    cancel: CancelFlag | None = None,
) -> Job[Throughput]:
    """Before/after samples/s and MB/s with the same DataLoader settings (shuffled, like training).

    Worker start-up is left out: the clock starts at the first batch.
    """
    torch = _torch()
    if torch is None:
        raise StallscopeError("measuring throughput needs torch (pip install torch)")
    after_ds = LMDBDataset(dst)
    meta = after_ds.meta
    try:
        before_ds = SourceDataset(meta["source"]["spec"], meta["preprocess"], meta["structure"])
    except SourceError as exc:
        after_ds.close()
        raise StallscopeError(f"cannot measure the original pipeline: {exc}") from exc
    rates = []
    total = 2 * max_samples
    try:
        for step, (name, ds) in enumerate((("original (decode per sample)", before_ds),
                                           ("LMDBDataset", after_ds))):  # fmt: skip
            rate = yield from _rate(torch, name, ds, num_workers, batch_size, seconds,
                                    max_samples, step * max_samples, total, cancel)  # fmt: skip
            rates.append(rate)
    finally:
        after_ds.close()
    return Throughput(rates[0], rates[1], num_workers, batch_size)


def _rate(torch, name, ds, num_workers, batch_size, seconds, max_samples, base, total, cancel):
    from torch.utils.data import DataLoader

    context = None
    if num_workers > 0 and threading.active_count() > 1:
        context = "spawn"  # never fork a process that runs other threads (the GUI)
    loader = DataLoader(
        _Safe(ds), batch_size=batch_size, shuffle=True, num_workers=num_workers,
        generator=torch.Generator().manual_seed(0), multiprocessing_context=context,
        collate_fn=_collate_skip_none, persistent_workers=num_workers > 0,
    )  # fmt: skip
    samples = nbytes = 0
    t0 = None
    while t0 is None or (samples < max_samples and time.perf_counter() - t0 < seconds):
        for batch in loader:  # epochs repeat until the time or sample budget is spent
            if t0 is None:  # the clock starts once workers are up
                t0 = time.perf_counter()
                continue
            samples += len(batch)
            nbytes += sum(t.numel() * t.element_size() for t in _tensors(batch))
            yield base + min(samples, max_samples), total
            if cancel is not None:
                cancel.check()
            if samples >= max_samples or time.perf_counter() - t0 >= seconds:
                break
        if t0 is None:
            break
    if t0 is None:
        raise StallscopeError(f"{name}: no batch could be read")
    return Rate(name, samples, time.perf_counter() - t0, nbytes)


class _Safe:
    """Wraps a dataset so an unreadable sample (the source's corrupt files) yields None."""

    def __init__(self, ds) -> None:
        self.ds = ds

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, index):
        try:
            return self.ds[index]
        except SampleError:
            return None


def _collate_skip_none(items):
    """A batch as a list: images of different sizes cannot be stacked, and stacking is the
    same copy for both pipelines. Tensors still travel from the workers as they would."""
    return [it for it in items if it is not None]


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
