"""The converter's one writer: records gathered into chunks (format.py) and committed in
batches, each commit carrying the progress marker in the same transaction; and the skip list
it writes beside them.

    writer = Writer(env, source, progress, chunk, needed)
    writer.add(pool.take(pending), pool); writer.due(*limits) and writer.commit()
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

import lmdb

from stallscope.core.errors import StallscopeError
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.destination import os_message
from stallscope.core.lmdb.source import Source

if TYPE_CHECKING:
    from stallscope.core.lmdb.pool import DecodePool


def _skip_value(source: Source, index: int, reason: str) -> bytes:
    return fmt.dumps({"source_index": index, "path": source.name_of(index), "reason": reason})


class Writer:
    """The one writer. Records gather into chunks of `chunk` samples (format.py); a full chunk
    goes into the open write transaction at once, the partial one at each commit (rewritten
    as it grows), and a commit adds the progress marker (the last source index written + 1)
    to that same transaction, so committed data and committed progress always agree, whatever
    stops the process. On resume the committed partial chunk is read back."""

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
        self.pending: list[bytes] = self._committed_partial()
        self.committed_pending = list(self.pending)

    def _committed_partial(self) -> list[bytes]:
        k = self.written % self.chunk
        if k == 0:
            return []
        with self.env.begin() as txn:
            value = txn.get(fmt.sample_key(self.written // self.chunk))
            records = fmt.chunk_records(value) if value is not None else []
            out = [bytes(r) for r, _crc in records]
        if len(out) != k:
            raise StallscopeError(f"{self.env.path()}: its last chunk holds {len(out)} samples, "
                                  f"its progress says {k}; convert into a new destination")
        return out

    def _txn(self):
        if self.txn is None:
            self.txn = self.env.begin(write=True)
        return self.txn

    def add(self, result, pool: DecodePool) -> None:
        """One task's result: ('slot', k, entries) in shared memory, or ('inline', records)."""
        txn = self._txn()
        if result[0] == "inline":
            for index, record, reason in result[1]:
                self._put(txn, index, record, reason)
            return
        _, slot, entries = result
        mv = pool.slot_view(slot, max((off + size for _i, off, size, _r in entries), default=0))
        for index, offset, size, reason in entries:
            if reason:
                self._put(txn, index, None, reason)
            else:
                self._put(txn, index, mv[offset : offset + size], "")

    def _put(self, txn, index: int, record, reason: str) -> None:
        if record is None:
            txn.put(fmt.skip_key(index), _skip_value(self.source, index, reason))
        else:
            self.pending.append(bytes(record))
            self.cur_written += 1
            self.batch_n += 1
            self.batch_bytes += len(record)
            if len(self.pending) == self.chunk:
                self._put_chunk(txn)
                self.pending = []
        self.cur_source = index + 1

    def _put_chunk(self, txn) -> None:
        first = self.cur_written - len(self.pending)
        key = fmt.sample_key(first // self.chunk)
        rewrite = first < self.written  # its partial self was committed: replace it
        txn.put(key, fmt.pack_chunk(self.pending), append=not rewrite)

    def due(self, every: int, nbytes: int, seconds: float) -> bool:
        return (
            self.batch_n >= every
            or self.batch_bytes >= nbytes
            or time.monotonic() - self.last_commit >= seconds
        )

    def commit(self, meta: dict | None = None, report: dict | None = None, extra=()) -> None:
        txn = self._txn()
        progress = {"next_source": self.cur_source, "written": self.cur_written}
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
            txn.commit()
        except lmdb.MapFullError:
            raise
        except lmdb.Error as exc:
            self.abort()
            raise StallscopeError(os_message(Path(self.env.path()), self.needed, exc)) from exc
        self.txn = None
        self.written, self.next_source = self.cur_written, self.cur_source
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
        self.pending = list(self.committed_pending)
        self.batch_n = self.batch_bytes = 0

    def skipped(self) -> list[dict]:
        """The skip list as the open transaction sees it (this run's skips included)."""
        return read_skipped(self._txn())

    def grow(self) -> None:
        self.abort()
        size = self.env.info()["map_size"]
        self.env.set_mapsize(2 * size + (1 << 20))
        self.growths += 1



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
