"""Check a converted LMDB: every record against its checksum (no source needed), and random
samples against the source, decoded again.

    result = run_job(verify(dst, n=64))          # seed chosen at random, result.seed says which
    result = run_job(verify(dst, n=64, seed=7))  # the same samples again
    result = run_job(check_records(dst))         # checksums only: `stallscope-cli verify DST`

Each run picks other samples (the seed is printed, --seed repeats a run). A sample is decoded
twice in this process: when the two decodes differ the Dataset is not deterministic (random
transforms), which is said as such instead of as a damaged LMDB.
"""

from __future__ import annotations

import os
import secrets
import zlib
from dataclasses import dataclass, field

import numpy as np

from stallscope.core.errors import StallscopeError
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.decoder import Decoder, source_desc
from stallscope.core.lmdb.errors import SampleError
from stallscope.core.lmdb.flatten import flatten
from stallscope.core.lmdb.folder import FolderSource
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.listing import stored_source
from stallscope.core.lmdb.writer import read_skipped

NOT_DETERMINISTIC = "your Dataset is not deterministic (random transforms?)"


@dataclass
class VerifyResult:
    checked: int
    mismatches: list[str] = field(default_factory=list)
    problem: str = ""  # why the source comparison could not run (source gone, ...)
    count: int = 0
    skipped: int = 0
    source_count: int = 0
    seed: int = 0
    records_checked: int = 0  # records whose crc32 was checked (all of them)
    damaged: list[str] = field(default_factory=list)  # records failing their checksum/format
    damaged_samples: int = 0  # samples those entries stand for (a missing chunk: all of its)
    checksums: bool = True  # False for format-1 LMDBs (no checksums stored)
    samples: list[int] = field(default_factory=list)  # the random samples compared
    all_records: bool = True  # every record's checksum checked (else the sampled ones only)

    @property
    def ok(self) -> bool:
        return (self.checked > 0 or self.records_checked > 0) and not (
            self.mismatches or self.problem or self.damaged
        )

    def summary(self) -> str:
        parts = []
        if self.damaged:
            bad = max(self.damaged_samples, len(self.damaged))
            parts.append(f"{bad:,} damaged record(s) of {self.records_checked:,}")
        elif not self.checksums:
            parts.append("no checksums (format 1 LMDB)")
        elif self.records_checked:
            parts.append(f"all {self.records_checked:,} records match their crc32")
        elif not self.all_records and self.checked:
            parts.append("the sampled records match their crc32 (stallscope-cli verify DST "
                         "checks all of them)")  # fmt: skip
        if self.problem:
            parts.append(f"source not compared: {self.problem}")
        elif self.mismatches:
            parts.append(f"{len(self.mismatches)} of {self.checked} checked samples differ from "
                         f"the source (seed {self.seed})")  # fmt: skip
        elif self.checked:
            parts.append(
                f"{self.checked} random samples identical to the source, byte for byte "
                f"(seed {self.seed}; {self.count} stored + {self.skipped} skipped = "
                f"{self.source_count} in the source)"
            )
        return "; ".join(parts)


def verify(
    dst: str | os.PathLike,
    n: int = 64,
    seed: int | None = None,
    cancel: CancelFlag | None = None,
    records: bool | None = None,
) -> Job[VerifyResult]:
    """Checksums of every record, then n random samples (their checksums too) against the
    source. n=0: checksums only (no source needed). records=None: every record when the
    LMDB is at most ALL_RECORDS_BYTES (reading 24 GB after converting 30M images would double
    the run), else the sampled ones only (`stallscope-cli verify` checks them all)."""
    ds = LMDBDataset(dst, verify_reads=True)
    try:
        result = VerifyResult(0, count=len(ds), source_count=int(ds.meta["source"]["count"]))
        result.seed = secrets.randbelow(1 << 31) if seed is None else int(seed)
        if records is None:
            records = n == 0 or _data_bytes(ds.path) <= ALL_RECORDS_BYTES
        result.all_records = records
        if records:
            yield from _check_records(ds, result, cancel)
        if n > 0:
            yield from _verify_source(ds, n, result, cancel)
        return result
    finally:
        ds.close()


def check_records(dst: str | os.PathLike, cancel: CancelFlag | None = None) -> Job[VerifyResult]:
    return (yield from verify(dst, n=0, seed=0, cancel=cancel, records=True))


ALL_RECORDS_BYTES = 2 << 30


def _data_bytes(path: str) -> int:
    try:
        return os.path.getsize(os.path.join(path, "data.mdb") if os.path.isdir(path) else path)
    except OSError:
        return 0


def _check_records(ds: LMDBDataset, result: VerifyResult, cancel) -> Job[None]:
    """Walk every chunk: its header, each record's crc32 and header. Damaged ones listed."""
    txn = ds._open()
    total = len(ds)
    if ds.version == 1:
        result.checksums = False
        for index in range(total):
            buf = txn.get(fmt.sample_key(index))
            problem = "missing" if buf is None else _record_problem(ds, buf)
            result.records_checked += 1
            if problem:
                result.damaged.append(f"sample {index}: {problem}")
                result.damaged_samples += 1
            if index % 4096 == 4095:
                yield index + 1, total
        return
    n_chunks = (total + ds.chunk - 1) // ds.chunk
    for c in range(n_chunks):
        first = c * ds.chunk
        want = min(ds.chunk, total - first)
        value = txn.get(fmt.sample_key(c))
        if value is None:
            _damaged(result, f"samples {first}..{first + want - 1}: chunk {c} is missing", want)
            continue
        try:
            n = fmt.chunk_count(value)
        except fmt.FormatError as exc:
            _damaged(result, f"samples {first}..{first + want - 1}: chunk {c}: {exc}", want)
            continue
        if n != want:
            _damaged(result, f"chunk {c} holds {n} samples, not {want}", abs(want - n),
                     checked=max(0, want - n))
        problem = fmt.chunk_problem(value)
        if problem:
            result.damaged.append(f"samples {first}..{first + n - 1}: chunk {c}: {problem}")
        for k in range(n):
            result.records_checked += 1
            try:
                record, crc = fmt.chunk_slot(value, k)
            except fmt.FormatError as exc:
                _damaged(result, f"sample {first + k}: {exc}", 1, checked=0)
                continue
            if zlib.crc32(record) != crc:
                _damaged(result, f"sample {first + k}: crc32 mismatch (bytes changed)", 1, 0)
                continue
            problem = _record_problem(ds, record)
            if problem:
                _damaged(result, f"sample {first + k}: {problem}", 1, checked=0)
        yield min(total, first + ds.chunk), total
        if cancel is not None:
            cancel.check()


def _damaged(result: VerifyResult, what: str, samples: int, checked: int | None = None) -> None:
    """One damaged entry standing for `samples` samples, of which `checked` were not counted
    as checked yet (default: all of them)."""
    result.damaged.append(what)
    result.damaged_samples += samples
    result.records_checked += samples if checked is None else checked


def _record_problem(ds: LMDBDataset, record) -> str:
    try:
        _src, views = fmt.parse(record)
    except fmt.FormatError as exc:
        return str(exc)
    if len(views) != len(ds._kinds):
        return f"{len(views)} fields, the metadata says {len(ds._kinds)}"
    return ""


def _verify_source(ds: LMDBDataset, n: int, result: VerifyResult, cancel) -> Job[None]:
    meta = ds.meta
    try:
        source = stored_source(ds)
    except StallscopeError as exc:
        result.problem = f"the source cannot be opened ({exc})"
        return
    result.skipped = len(read_skipped(ds.env))
    if result.count + result.skipped != result.source_count:
        result.mismatches.append(
            f"{result.count} stored + {result.skipped} skipped != {result.source_count} in source"
        )
    decoder = Decoder(source_desc(source), meta["preprocess"], meta["structure"])
    torch = _torch()
    rng = np.random.default_rng(result.seed)
    picks = np.sort(rng.choice(len(ds), min(n, len(ds)), replace=False))
    result.samples = picks.tolist()
    as_stored = Preprocess(rgb=False, floats="float32")
    for done, k in enumerate(picks.tolist()):
        try:
            src_index, stored = ds.arrays(k)
        except StallscopeError as exc:
            result.mismatches.append(f"sample {k}: {exc}")
            result.checked += 1
            continue
        name = source.name_of(src_index) if 0 <= src_index < len(source) else "?"
        problem = _source_problem(decoder, source, src_index, stored)
        if not problem and torch is not None:
            try:
                _, returned = flatten(ds[k], as_stored)
                problem = _compare(stored, [a for _kind, _d, a in returned], "reader ")
            except (StallscopeError, SampleError) as exc:
                problem = f"reader: {exc}"
        if problem == NOT_DETERMINISTIC:
            result.problem = f"{NOT_DETERMINISTIC}: sample {k} ({name}) decodes differently twice"
            return
        if problem:
            result.mismatches.append(f"sample {k} ({name}): {problem}")
        result.checked += 1
        yield done + 1, len(picks)
        if cancel is not None:
            cancel.check()


def _source_problem(decoder: Decoder, source, src_index: int, stored: list) -> str:
    if not 0 <= src_index < len(source):
        return f"source index {src_index} is outside the source"
    if isinstance(source, FolderSource):
        changed = source.changed(src_index)
        if changed:
            return f"the source file {changed}"
    entry = source.task(src_index, src_index + 1)[0]
    try:
        _, _, leaves = decoder.sample(entry)
        _, _, again = decoder.sample(entry)
    except SampleError as exc:
        return f"source now fails: {exc}"
    expected = [a for _kind, _d, a in leaves]
    if _compare(expected, [a for _kind, _d, a in again]):
        return NOT_DETERMINISTIC
    return _compare(expected, stored)


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
