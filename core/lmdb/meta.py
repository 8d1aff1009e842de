"""A stallscope LMDB's metadata, read back and checked before anything trusts it: the file may
be damaged or hostile (wrong types, absurd counts or nesting)."""

from __future__ import annotations

import os
from typing import cast

import lmdb

from stallscope.core.errors import StallscopeError
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.handles import acquire, data_file, release
from stallscope.core.lmdb.structure import structure_problem


def read_meta(path: str | os.PathLike) -> tuple[dict, dict]:
    """(metadata, progress) of a stallscope LMDB; StallscopeError (one line) when it is not
    one, or when its metadata is damaged or hostile (wrong types, absurd nesting)."""
    path = str(path)
    if not os.path.exists(path):
        raise StallscopeError(f"{path}: no such LMDB")
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "data.mdb")):
        raise StallscopeError(f"{path}: not an LMDB (no data.mdb in {path})")
    data = data_file(path)
    if os.path.isfile(data) and os.path.getsize(data) == 0:
        raise StallscopeError(f"{data}: not an LMDB (an empty file)")
    try:
        _env, txn = acquire(path, readahead=False)
    except lmdb.Error as exc:
        raise StallscopeError(f"{path}: not an LMDB ({' '.join(str(exc).split())})") from exc
    meta: object  # the stored bytes, then what they decode to: checked before it is trusted
    progress: object
    try:
        meta, progress = txn.get(fmt.META_KEY), txn.get(fmt.PROGRESS_KEY)
        meta, progress = (bytes(v) if v is not None else None for v in (meta, progress))
    finally:
        release(path)
    try:
        meta = fmt.loads(meta) if meta is not None else None
    except (ValueError, RecursionError):
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != fmt.FORMAT:
        raise StallscopeError(f"{path}: an LMDB that stallscope did not write")
    if meta.get("version") not in fmt.READABLE_VERSIONS:
        raise StallscopeError(f"{path}: stallscope LMDB format {meta.get('version')!r} is not "
                              "known (written by a newer stallscope?)")  # fmt: skip
    try:
        progress = fmt.loads(progress) if progress is not None else {}
    except (ValueError, RecursionError):
        progress = None
    problem = _meta_problem(meta, progress)
    if problem:
        raise StallscopeError(f"{path}: damaged metadata: {problem}")
    return meta, cast(dict, progress)  # _meta_problem: a dict


def _meta_problem(meta: dict, progress: object) -> str:
    """What is wrong with metadata read from a file ('' when nothing)."""
    source = meta.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("spec"), str):
        return "no source"
    if source.get("kind") not in ("folder", "factory"):
        return f"source kind {source.get('kind')!r}"
    if not _count(source.get("count")) or (meta.get("complete") and not _count(meta.get("count"))):
        return "count is not a sample count"
    chunk = meta.get("chunk", 1)
    if not (_count(chunk) and 1 <= chunk <= fmt.MAX_CHUNK):
        return f"chunk {chunk!r}"
    if not isinstance(progress, dict) or not _count(progress.get("written", 0)):
        return "progress record"
    for key in ("classes", "fields"):
        if not isinstance(meta.get(key, []), list):
            return f"{key} is not a list"
    problem = structure_problem(meta.get("structure"))
    if problem:
        return f"structure: {problem}"
    return ""


def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= fmt.MAX_SAMPLES
