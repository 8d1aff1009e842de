"""The folder listing a conversion scanned, kept inside the LMDB so that resume and verify do
not walk and stat millions of files again.

    blocks = listing_blocks(source)          # [(key, value)], written with the metadata
    files, labels, sizes, mtimes = read_listing(txn, count)

A block holds up to BLOCK entries, zlib-compressed:
    uint32 n | int64 label[n] | int64 size[n] | int64 mtime_ns[n] | names, NUL-separated
Names are the file-system bytes of each path relative to the source root (os.fsencode), so a
name that is not UTF-8 round-trips exactly.
"""

from __future__ import annotations

import os
import struct
import zlib

import numpy as np

from stallscope.core.lmdb.errors import SourceError
from stallscope.core.lmdb.folder import FolderSource, folder_from_listing
from stallscope.core.lmdb.format import KEY_DIGITS, LIST_PREFIX, FormatError
from stallscope.core.lmdb.source import open_source

BLOCK = 1 << 16
_N = struct.Struct("<I")


def block_key(block: int) -> bytes:
    return LIST_PREFIX + b"%0*d" % (KEY_DIGITS, block)


def listing_blocks(files: list[str], labels: np.ndarray, sizes: np.ndarray, mtimes: np.ndarray):
    """Yield (key, value) for every block of the listing."""
    for block in range((len(files) + BLOCK - 1) // BLOCK):
        yield listing_block(block, files, labels, sizes, mtimes)


def listing_block(block: int, files: list[str], labels: np.ndarray, sizes: np.ndarray,
                  mtimes: np.ndarray) -> tuple[bytes, bytes]:
    """(key, value) of one block of the listing (rewritten when a file in it changed)."""
    start = block * BLOCK
    stop = min(len(files), start + BLOCK)
    names = b"\0".join(os.fsencode(f) for f in files[start:stop])
    raw = b"".join([
        _N.pack(stop - start),
        np.ascontiguousarray(labels[start:stop], "<i8").tobytes(),
        np.ascontiguousarray(sizes[start:stop], "<i8").tobytes(),
        np.ascontiguousarray(mtimes[start:stop], "<i8").tobytes(),
        names,
    ])  # fmt: skip
    return block_key(block), zlib.compress(raw, 1)


def read_listing(txn, count: int):
    """(files, labels, sizes, mtimes) of a stored listing of `count` entries; FormatError when
    it is missing or damaged."""
    files: list[str] = []
    parts: list[list[np.ndarray]] = [[], [], []]
    for block in range((count + BLOCK - 1) // BLOCK):
        value = txn.get(block_key(block))
        if value is None:
            raise FormatError(f"listing block {block} is missing")
        try:
            raw = zlib.decompress(bytes(value))
            (n,) = _N.unpack_from(raw, 0)
            pos = _N.size
            for part in parts:
                part.append(np.frombuffer(raw, "<i8", n, pos).astype(np.int64))
                pos += 8 * n
            names = raw[pos:].split(b"\0") if n else []
        except (zlib.error, struct.error, ValueError) as exc:
            raise FormatError(f"listing block {block} is damaged ({exc})") from exc
        if len(names) != n:
            raise FormatError(f"listing block {block} names {len(names)} files, not {n}")
        files += [os.fsdecode(name) for name in names]
    if len(files) != count:
        raise FormatError(f"the listing holds {len(files)} files, not {count}")
    labels, sizes, mtimes = (np.concatenate(p) if p else np.zeros(0, np.int64) for p in parts)
    return files, labels, sizes, mtimes


def stored_folder(txn, meta: dict) -> FolderSource:
    """The folder a conversion scanned, rebuilt from the listing stored beside its samples
    (FormatError when the listing is damaged)."""
    listing = read_listing(txn, int(meta["listing"]))
    return folder_from_listing(meta["source"]["spec"], meta["classes"], listing)


def stored_source(ds):
    """The source of the conversion an LMDBDataset holds: a folder rebuilt from its stored
    listing (no scan, no stat), a factory opened again (SourceError when it cannot be, or
    when it changed)."""
    meta = ds.meta
    if meta["source"]["kind"] == "folder" and "listing" in meta:
        try:
            source = stored_folder(ds._open(), meta)
        except FormatError as exc:
            raise SourceError(f"{ds.path}: {exc}") from exc
        if not source.root.is_dir():
            raise SourceError(f"{source.root}: no such folder")
        return source
    source = open_source(meta["source"]["spec"])
    if source.fingerprint() != meta["source"]["fingerprint"]:
        raise SourceError(f"{source.spec} changed since it was converted")
    return source
