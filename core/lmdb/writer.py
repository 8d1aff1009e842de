"""The converter's one writer: records gathered into chunks (format.py) and committed in
batches, each commit carrying the progress marker in the same transaction; and the skip list
it writes beside them.

    writer = Writer(env, source, progress, chunk, needed)
    writer.add(pool.take(pending), pool); writer.due(*limits) and writer.commit()
    (pool.take gives a task's records as decoder.Encoded)
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import lmdb
import numpy as np

from stallscope.core.errors import StallscopeError
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.decoder import CHANGED
from stallscope.core.lmdb.destination import os_message
from stallscope.core.lmdb.folder import FolderSource
from stallscope.core.lmdb.listing import BLOCK, listing_block
from stallscope.core.lmdb.source import Source

if TYPE_CHECKING:
    from stallscope.core.lmdb.decoder import Encoded
    from stallscope.core.lmdb.pool import DecodePool


def _skip_value(source: Source, index: int, reason: str) -> bytes:
    return fmt.dumps({"source_index": index, "path": source.name_of(index), "reason": reason})


class Writer:
    """The one writer. Records gather into chunks of `chunk` samples (format.py); a full chunk
    goes into the open write transaction at once, the partial one at each commit (rewritten
    as it grows), and a commit adds the progress marker (the last source index written + 1)
    to that same transaction, so committed data and committed progress always agree, whatever
    stops the process. On resume the committed partial chunk is read back.

    A task's records arrive laid end to end with their sizes and checksums (decoder.Encoded):
    the writer cuts that run into chunks without touching each record."""

    def __init__(self, env, source: Source, progress: dict, chunk: int, needed: int) -> None:
        self.env = env
        self.source = source
        self.chunk = chunk
        self.needed = needed
        self.written = self.cur_written = int(progress["written"])
        self.next_source = self.cur_source = int(progress["next_source"])
        self.txn = None
        self.batch_n = self.batch_bytes = 0
        self.last_commit = time.monotonic()
        self.growths = 0
        # every record's layout (format.layout_key -> [records, first source index]), committed
        # in the progress record with the data it counts; None: resumed from a conversion
        # that did not count them
        self.layouts, self.more = _read_layouts(progress)
        self.cur_layouts = _copy(self.layouts)
        self.cur_more = self.more
        # notes on kept samples (decoder.NARROWED + mode) -> [samples, first source index]
        self.notes = _read_notes(progress)
        self.cur_notes = _copy(self.notes) or {}
        # files converted as they are now, not as listed ({"path", "reason"}), this run; the
        # listing blocks that hold them (rewritten at each commit: the arrays stay updated)
        self.changed: list[dict] = []
        self.cur_changed: list[dict] = []
        self.relisted_blocks: set[int] = set()
        # the partial chunk: runs of records [(bytes, sizes int64, crcs uint32)]
        self.pending: list[tuple] = self._committed_partial()
        self.committed_pending = list(self.pending)
        self.chunk_start = self.written - self.written % chunk  # the partial chunk's first

    @property
    def pending_n(self) -> int:
        return sum(len(sizes) for _data, sizes, _crcs in self.pending)

    def _committed_partial(self) -> list[tuple]:
        k = self.written % self.chunk
        if k == 0:
            return []
        with self.env.begin() as txn:
            value = txn.get(fmt.sample_key(self.written // self.chunk))
            records = fmt.chunk_records(value) if value is not None else []
            data = b"".join(bytes(r) for r, _crc in records)
            sizes = np.fromiter((len(r) for r, _crc in records), np.int64, len(records))
            crcs = np.fromiter((crc for _r, crc in records), "<u4", len(records))
        if len(records) != k:
            raise StallscopeError(f"{self.env.path()}: its last chunk holds {len(records)} "
                                  f"samples, its progress says {k}; convert into a new "
                                  "destination")  # fmt: skip
        return [(data, sizes, crcs)]

    def _txn(self):
        if self.txn is None:
            self.txn = self.env.begin(write=True)
        return self.txn

    def add(self, result: Encoded, pool: DecodePool) -> None:
        """One task's records (decoder.Encoded: in a /dev/shm slot of the pool, or inline)."""
        txn = self._txn()
        for index, reason in result.skips:
            txn.put(fmt.skip_key(index), _skip_value(self.source, index, reason))
        if result.nbytes:
            where = result.where
            if isinstance(where, int):  # copied out: the slot is handed out again
                data = pool.slot_view(where, result.nbytes)[: result.nbytes].tobytes()
            else:
                data = bytes(where) if not isinstance(where, bytes) else where
            sizes = np.frombuffer(result.sizes, np.int64)
            crcs = np.frombuffer(result.crcs, "<u4")
            self.cur_written += len(sizes)
            self.batch_n += len(sizes)
            self.batch_bytes += result.nbytes
            self._extend(txn, memoryview(data), sizes, crcs)
        if self.cur_layouts is not None:
            for key, (n, first) in result.layouts.items():
                seen = self.cur_layouts.get(key)
                if seen is not None:
                    seen[0] += n
                elif len(self.cur_layouts) < MAX_LAYOUTS:
                    self.cur_layouts[key] = [n, first]
                else:
                    self.cur_more += n
        for index, note in result.notes:
            if note.startswith(CHANGED):
                self._relist(index, note)
                continue
            if note not in self.cur_notes and len(self.cur_notes) >= MAX_NOTES:
                note = note.split(":", 1)[0] + ":" + OTHER_NOTE  # e.g. a thousand sizes padded
            seen_note = self.cur_notes.setdefault(note, [0, index])
            seen_note[0] += 1
        self.cur_source = max(self.cur_source, result.stop)

    def _relist(self, index: int, note: str) -> None:
        """A file converted as it is now, not as the scan listed it: its listing entry takes
        its size and mtime (written with the next commit), and this run names it."""
        assert isinstance(self.source, FolderSource)
        size, mtime = (int(v) for v in note[len(CHANGED):].split(":"))
        why = self.source.relisted(index, size, mtime)
        self.cur_changed.append({"path": self.source.name_of(index), "reason": why})
        self.relisted_blocks.add(index // BLOCK)

    def _extend(self, txn, data: memoryview, sizes: np.ndarray, crcs: np.ndarray) -> None:
        while len(sizes):
            room = self.chunk - self.pending_n
            if len(sizes) < room:
                self.pending.append((data, sizes, crcs))
                return
            nbytes = int(sizes[:room].sum())
            self.pending.append((data[:nbytes], sizes[:room], crcs[:room]))
            self._put_chunk(txn)
            self.pending = []
            self.chunk_start += self.chunk
            data, sizes, crcs = data[nbytes:], sizes[room:], crcs[room:]

    def _put_chunk(self, txn) -> None:
        first = self.chunk_start
        key = fmt.sample_key(first // self.chunk)
        rewrite = first < self.written  # its partial self was committed: replace it
        value = fmt.chunk_value(
            [d for d, _s, _c in self.pending],
            np.concatenate([s for _d, s, _c in self.pending]),
            np.concatenate([c for _d, _s, c in self.pending]),
        )
        if not txn.put(key, value, append=not rewrite):  # False: a key out of order
            raise StallscopeError(f"chunk {key.decode()} was written out of order")

    def due(self, every: int | None, nbytes: int, seconds: float) -> bool:
        return (
            (every is not None and self.batch_n >= every)
            or self.batch_bytes >= nbytes
            or time.monotonic() - self.last_commit >= seconds
        )

    def commit(self, meta: dict | None = None, report: dict | None = None, extra=()) -> None:
        txn = self._txn()
        progress: dict = {"next_source": self.cur_source, "written": self.cur_written}
        if self.cur_layouts is not None:
            progress["layouts"] = [[k.hex(), n, first] for k, (n, first)
                                   in self.cur_layouts.items()]  # fmt: skip
            progress["layouts_more"] = self.cur_more
        if self.cur_notes:
            progress["notes"] = [[note, n, first] for note, (n, first) in self.cur_notes.items()]
        try:
            if self.pending:
                self._put_chunk(txn)
            txn.put(fmt.PROGRESS_KEY, fmt.dumps(progress))
            if meta is not None:
                txn.put(fmt.META_KEY, fmt.dumps(meta))
            if report is not None:
                txn.put(fmt.REPORT_KEY, fmt.dumps(report))
            for key, value in extra:
                txn.put(key, value)
            if self.relisted_blocks:
                assert isinstance(self.source, FolderSource)
                files, labels, sizes, mtimes = self.source.listing()
                for block in sorted(self.relisted_blocks):
                    txn.put(*listing_block(block, files, labels, sizes, mtimes))
            txn.commit()
        except lmdb.MapFullError:
            raise
        except lmdb.Error as exc:
            self.abort()
            raise StallscopeError(os_message(Path(self.env.path()), self.needed, exc)) from exc
        self.txn = None
        self.written, self.next_source = self.cur_written, self.cur_source
        self.layouts, self.more = _copy(self.cur_layouts), self.cur_more
        self.notes = _copy(self.cur_notes) or {}
        self.changed = list(self.cur_changed)
        self.relisted_blocks = set()
        self.committed_pending = list(self.pending)
        self.batch_n = self.batch_bytes = 0
        self.last_commit = time.monotonic()

    def commit_or_abort(self) -> None:
        try:
            self.commit()
        except (lmdb.Error, StallscopeError):
            self.abort()

    def abort(self) -> None:
        if self.txn is not None:
            with contextlib.suppress(lmdb.Error):
                self.txn.abort()
            self.txn = None
        self.cur_written, self.cur_source = self.written, self.next_source
        self.cur_layouts, self.cur_more = _copy(self.layouts), self.more
        self.cur_notes = _copy(self.notes) or {}
        self.cur_changed = list(self.changed)  # decoded again, they are named again
        self.pending = list(self.committed_pending)
        self.chunk_start = self.written - self.written % self.chunk
        self.batch_n = self.batch_bytes = 0

    def layout_counts(self) -> tuple[dict[bytes, list[int]], int] | None:
        """({layout_key: [records, first source index]}, records in layouts past the first
        MAX_LAYOUTS) of everything written so far; None when a resumed conversion began
        before stallscope counted them."""
        if self.cur_layouts is None:
            return None
        return _copy(self.cur_layouts) or {}, self.cur_more

    def skipped(self) -> list[dict]:
        """The skip list as the open transaction sees it (this run's skips included)."""
        return read_skipped(self._txn())

    def grow(self) -> None:
        self.abort()
        size = self.env.info()["map_size"]
        self.env.set_mapsize(2 * size + (1 << 20))
        self.growths += 1



MAX_LAYOUTS = 256  # layouts listed one by one; past that only their records are counted
MAX_NOTES = 64  # notes counted one by one; past that "<kind>:" + OTHER_NOTE counts the rest
OTHER_NOTE = "other sizes"


def _read_layouts(progress: dict) -> tuple[dict[bytes, list[int]] | None, int]:
    stored = progress.get("layouts")
    if stored is None:
        return ({} if not progress.get("written") else None), 0
    try:
        layouts = {bytes.fromhex(k): [int(n), int(first)] for k, n, first in stored}
        return layouts, int(progress.get("layouts_more", 0))
    except (TypeError, ValueError):
        return None, 0  # a damaged record: the layouts are not known


def _read_notes(progress: dict) -> dict[str, list[int]]:
    try:
        return {str(note): [int(n), int(first)] for note, n, first in progress.get("notes", [])}
    except (TypeError, ValueError):
        return {}


Key = TypeVar("Key", str, bytes)


def _copy(counts: dict[Key, list[int]] | None) -> dict[Key, list[int]] | None:
    return None if counts is None else {k: list(v) for k, v in counts.items()}


def read_skipped(env_or_txn) -> list[dict]:
    """The skip list, from an environment or inside an open transaction."""
    if isinstance(env_or_txn, lmdb.Environment):
        with env_or_txn.begin() as txn:
            return read_skipped(txn)
    out = []
    with env_or_txn.cursor() as cur:
        if cur.set_range(fmt.SKIP_PREFIX):
            for key, value in cur:
                if not key.startswith(fmt.SKIP_PREFIX):
                    break
                out.append(fmt.loads(value))
    return out
