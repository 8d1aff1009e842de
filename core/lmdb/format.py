"""The on-disk format of a stallscope LMDB: raw bytes behind a small binary header. No pickle.

Keys (version 2)
    b"0000000000" ...   one chunk per `meta["chunk"]` consecutive samples: chunk c holds samples
                        c*chunk .. c*chunk+chunk-1 (key = c, zero-padded so key order is
                        sample order)
    b"!meta"            JSON: format, version, chunk, source, preprocess, fields, structure,
                        classes, count
    b"!progress"        JSON: {"next_source": i, "written": k, "layouts": [[layout_key hex,
                        records, first source index], ...], "layouts_more": n}; committed with
                        the data it counts (a finished conversion's meta "survey" and "stored"
                        say every record's shapes from it)
    b"!skip/<source>"   JSON: {"source_index", "path", "reason"}: a sample that could not be read
    b"!list/<block>"    the folder listing of the scan (names, labels, sizes, mtimes; listing.py)
    b"!report"          JSON: the finished conversion's summary (written with the last batch)

'!' sorts before the digits, so chunk keys can be written with MDB_APPEND.

Why chunks: one LMDB value per sample costs ~35% on tiny images (16x16: 1,029 B for 768 B of
pixels) and a whole 4 KiB overflow page for samples just under it (32x32: 4,125 B for 3,072 B).
Packing consecutive samples into values of ~128 KiB costs 8 bytes per sample (its end offset and
its crc32) and at most one partly used page per chunk, and random access stays one lookup.
A chunk is
    magic b"SSC2" | uint32 n | uint64 0
    uint32 end[n]     (each record's end, relative to the first record)
    uint32 crc32[n]   (zlib.crc32 of each record's bytes, checked by `verify` without the source)
    padding to 16 bytes, then the n records, each a multiple of 16 bytes long.

Version 1 (still read): one record per key b"%010d" % sample, no chunk header, no checksum.

A sample record is
    magic b"SSR1" | uint32 source_index | uint16 n_fields | uint16 0
    n_fields x (uint8 dtype code | uint8 ndim | uint16 0 | uint32 shape[ndim])
    padding to 16 bytes, then each field's raw C-order bytes, each padded to 16 bytes.
The 16-byte alignment lets a reader view float/int fields in place with np.frombuffer.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from stallscope.core import untrusted
from stallscope.core.errors import StallscopeError

FORMAT = "stallscope-lmdb"
VERSION = 2
READABLE_VERSIONS = (1, 2)
KEY_DIGITS = 10
META_KEY = b"!meta"
PROGRESS_KEY = b"!progress"
REPORT_KEY = b"!report"
SKIP_PREFIX = b"!skip/"
LIST_PREFIX = b"!list/"
MAX_SAMPLES = 10**KEY_DIGITS - 1
CHUNK_BYTES = 128 << 10  # target chunk value size
MAX_CHUNK = 4096  # samples per chunk at most

MAGIC = b"SSR1"
_HEAD = struct.Struct("<4sIHH")
_FIELD = struct.Struct("<BBH")
_U32 = struct.Struct("<I")
ALIGN = 16

# dtype code -> numpy dtype name; "bfloat16" has no numpy dtype and is stored as its raw 2 bytes.
DTYPES = (
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
    "float16", "float32", "float64", "bool", "bfloat16",
)  # fmt: skip
DTYPE_CODE = {name: code for code, name in enumerate(DTYPES)}
_NP_DTYPE = {name: np.dtype("uint16" if name == "bfloat16" else name) for name in DTYPES}


class FormatError(StallscopeError, ValueError):
    """A record or metadata value that is not in the stallscope format."""


def chunk_for(record_bytes: float) -> int:
    """Samples per chunk for records of about this size: ~CHUNK_BYTES per value, 1 for big ones."""
    return int(max(1, min(MAX_CHUNK, CHUNK_BYTES // max(int(record_bytes) + 8, 1))))


def sample_key(index: int) -> bytes:
    return b"%0*d" % (KEY_DIGITS, index)


def skip_key(source_index: int) -> bytes:
    return SKIP_PREFIX + b"%0*d" % (KEY_DIGITS, source_index)


def dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def loads(raw) -> dict:
    """A metadata value, read as any file stallscope did not write (core/untrusted.py): capped,
    depth-limited, undecodable bytes replaced. ValueError saying what is wrong."""
    try:
        return untrusted.loads(bytes(raw), "LMDB metadata", cap=untrusted.CAPS["LMDB metadata"])
    except StallscopeError as exc:
        raise ValueError(str(exc)) from None


def _pad(n: int) -> int:
    return -n % ALIGN


Shape = tuple[int, ...]


def plan(source_index: int, fields: list[tuple[str, Shape]]) -> tuple[bytes, list[int], int]:
    """(header bytes, payload offset per field, record size) for fields [(dtype name, shape)].
    Layouts repeat (every image of a folder after a crop), so they are planned once each."""
    key = tuple(fields)
    planned = _PLANS.get(key)
    if planned is None:
        planned = _plan(fields)
        if len(_PLANS) < 4096:
            _PLANS[key] = planned
    header, offsets, size = planned
    return MAGIC + _U32.pack(source_index) + header[8:], offsets, size


_PLANS: dict[tuple, tuple[bytes, list[int], int]] = {}


def _plan(fields: list[tuple[str, Shape]]) -> tuple[bytes, list[int], int]:
    head = [_HEAD.pack(MAGIC, 0, len(fields), 0)]
    for dtype, shape in fields:
        head.append(_FIELD.pack(DTYPE_CODE[dtype], len(shape), 0))
        head.append(struct.pack(f"<{len(shape)}I", *shape))
    header = b"".join(head)
    pos = len(header) + _pad(len(header))
    offsets = []
    for dtype, shape in fields:
        offsets.append(pos)
        nbytes = _NP_DTYPE[dtype].itemsize * math.prod(shape)
        pos += nbytes + _pad(nbytes)
    return header, offsets, pos


def write(buf, pos: int, header: bytes, offsets: list[int], arrays: list[np.ndarray]) -> None:
    """Fill a planned record at buf[pos:] (writable, zeroed). Arrays may be strided views (an
    HWC image transposed to CHW): the copy into the record is the only copy."""
    buf[pos : pos + len(header)] = header
    for offset, arr in zip(offsets, arrays, strict=True):
        if arr.nbytes == 0:
            continue
        dst = np.frombuffer(buf, np.uint8, arr.nbytes, pos + offset)
        np.copyto(dst.view(arr.dtype).reshape(arr.shape), arr, casting="no")


@dataclass(frozen=True, slots=True)
class FieldView:
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


_LAYOUTS: dict[bytes, list[FieldView]] = {}  # header bytes (less the source index) -> views
_SHAPE_FMT = [struct.Struct(f"<{n}I") for n in range(9)]


def parse(buf) -> tuple[int, list[FieldView]]:
    """Header of a record (bytes or memoryview) -> (source_index, field views into buf).

    Records of a dataset usually share one layout, so layouts are cached by their header bytes:
    a hit costs one slice and one dict lookup instead of a parse."""
    if len(buf) < _HEAD.size:
        raise FormatError("record shorter than its header")
    magic, source_index, n_fields, _ = _HEAD.unpack_from(buf, 0)
    if magic != MAGIC:
        raise FormatError(f"record starts with {bytes(magic)!r}, not {MAGIC!r}")
    for key_len in _KEY_LENS:
        views = _LAYOUTS.get(bytes(buf[8:key_len]))
        if views is not None and views[-1].offset + views[-1].nbytes <= len(buf):
            return source_index, views
    pos = _HEAD.size
    heads = []
    try:
        for _ in range(n_fields):
            code, ndim, _ = _FIELD.unpack_from(buf, pos)
            shape = (_SHAPE_FMT[ndim] if ndim < 9 else struct.Struct(f"<{ndim}I")).unpack_from(
                buf, pos + _FIELD.size
            )
            pos += _FIELD.size + 4 * ndim
            heads.append((DTYPES[code], shape))
    except (struct.error, IndexError) as exc:
        raise FormatError(f"record header is damaged ({exc})") from exc
    header_end = pos
    pos += _pad(pos)
    views = []
    for dtype, shape in heads:
        nbytes = _NP_DTYPE[dtype].itemsize * math.prod(shape)
        views.append(FieldView(dtype, shape, pos, nbytes))
        pos += nbytes + _pad(nbytes)
    if pos > len(buf):
        raise FormatError(f"record is {len(buf)} bytes, its header describes {pos}")
    if views and len(_LAYOUTS) < 4096:
        _LAYOUTS[bytes(buf[8:header_end])] = views
        if header_end not in _KEY_LENS:
            _KEY_LENS.append(header_end)
    return source_index, views


_KEY_LENS: list[int] = []


def layout_key(buf, pos: int = 0) -> bytes:
    """The layout of the record at buf[pos:]: its header less magic and source index (the
    field count, then each field's dtype code and shape). Records with one layout stack into
    one batch; the converter counts them (meta "shapes")."""
    n_fields = struct.unpack_from("<H", buf, pos + 8)[0]
    end = pos + _HEAD.size
    for _ in range(n_fields):
        end += _FIELD.size + 4 * buf[end + 1]
    return bytes(buf[pos + 8 : end])


def layout_fields(key: bytes) -> list[tuple[str, list[int]]]:
    """[(dtype, shape)] of each field of a layout_key."""
    n_fields = struct.unpack_from("<H", key, 0)[0]
    pos, out = 4, []
    for _ in range(n_fields):
        code, ndim, _ = _FIELD.unpack_from(key, pos)
        out.append((DTYPES[code], list(struct.unpack_from(f"<{ndim}I", key, pos + _FIELD.size))))
        pos += _FIELD.size + 4 * ndim
    return out


def view_array(buf, field: FieldView) -> np.ndarray:
    """Zero-copy numpy view of one field (read-only when buf is)."""
    dtype = _NP_DTYPE[field.dtype]
    arr = np.frombuffer(buf, dtype=dtype, count=field.nbytes // dtype.itemsize, offset=field.offset)
    return arr.reshape(field.shape)


def record_size(fields: list[tuple[str, Shape]]) -> int:
    """Bytes one record takes, for size estimates."""
    return plan(0, fields)[2]


# ----------------------------------------------------------------------------- chunks

CHUNK_MAGIC = b"SSC2"
_CHUNK_HEAD = struct.Struct("<4sIQ")


def chunk_value(parts: list, sizes: np.ndarray, crcs: np.ndarray) -> bytes:
    """One chunk value from its records' bytes laid end to end (in any number of parts), each
    record's size and its crc32 (zlib.crc32 of its bytes)."""
    n = len(sizes)
    ends = np.cumsum(sizes, dtype=np.int64)
    if n and ends[-1] >= 1 << 32:
        raise FormatError(f"{n} samples of {int(ends[-1]) // n:,} bytes on average overflow one "
                          "chunk (its samples are far bigger than the first ones were)")
    head = (_CHUNK_HEAD.pack(CHUNK_MAGIC, n, 0) + ends.astype("<u4").tobytes()
            + np.asarray(crcs, "<u4").tobytes())  # fmt: skip
    return b"".join([head, bytes(_pad(len(head))), *parts])


def chunk_count(chunk) -> int:
    """Records in a chunk value; FormatError when it is not one."""
    if len(chunk) < _CHUNK_HEAD.size:
        raise FormatError("chunk shorter than its header")
    magic, n, _ = _CHUNK_HEAD.unpack_from(chunk, 0)
    if magic != CHUNK_MAGIC:
        raise FormatError(f"chunk starts with {bytes(magic)!r}, not {CHUNK_MAGIC!r}")
    if _CHUNK_HEAD.size + 8 * n > len(chunk):
        raise FormatError(f"chunk of {len(chunk)} bytes cannot hold {n} records")
    return n


def chunk_slot(chunk, k: int):
    """(record memoryview, stored crc32) of record k of a chunk (bytes or memoryview)."""
    start, end, crc = chunk_span(chunk, k)
    return memoryview(chunk)[start:end], crc


def chunk_span(chunk, k: int) -> tuple[int, int, int]:
    """(start, end, stored crc32) of record k within a chunk value."""
    n = chunk_count(chunk)
    if not 0 <= k < n:
        raise FormatError(f"chunk holds {n} records, not {k + 1}")
    base = _CHUNK_HEAD.size + 8 * n
    base += _pad(base)
    start = _U32.unpack_from(chunk, _CHUNK_HEAD.size + 4 * (k - 1))[0] if k else 0
    end = _U32.unpack_from(chunk, _CHUNK_HEAD.size + 4 * k)[0]
    crc = _U32.unpack_from(chunk, _CHUNK_HEAD.size + 4 * (n + k))[0]
    if not start <= end <= len(chunk) - base:
        raise FormatError(f"record {k} of the chunk lies outside it ({start}..{end})")
    return base + start, base + end, crc


def chunk_problem(chunk) -> str:
    """What is wrong with a chunk's own bytes, outside its records ('' when nothing): the
    reserved field and the padding are zero, the ends rise and the last one closes the chunk,
    so a changed byte anywhere in a chunk is caught (records: by their crc32)."""
    try:
        n = chunk_count(chunk)
    except FormatError as exc:
        return str(exc)
    reserved = _CHUNK_HEAD.unpack_from(chunk, 0)[2]
    base = _CHUNK_HEAD.size + 8 * n
    pad = _pad(base)
    ends = np.frombuffer(chunk, "<u4", n, _CHUNK_HEAD.size).astype(np.int64)
    if reserved:
        return "chunk header's reserved field is not zero"
    if any(bytes(chunk[base : base + pad])):
        return "chunk header's padding is not zero"
    if n and (np.any(np.diff(ends) < 0) or ends[0] < 0 or base + pad + ends[-1] != len(chunk)):
        return "chunk's record offsets do not add up to its size"
    return ""


def chunk_records(chunk) -> list[tuple[memoryview, int]]:
    """Every (record, stored crc32) of a chunk."""
    return [chunk_slot(chunk, k) for k in range(chunk_count(chunk))]


def crc_ok(record, crc: int) -> bool:
    return zlib.crc32(record) == crc
