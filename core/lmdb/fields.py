"""What each field of a conversion is stored as, said in one line each (the CLI and wizard).

    stored_fields(structure, names, leaves) -> [{"name", "kind", "dtype", "from", "shape"}]
    field_lines(stored) -> ["image: uint8 3x16x16", "x: float32 values on k/255 steps, stored
                            as uint8 (4x smaller); the reader returns uint8", ...]
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from stallscope.core.lmdb.structure import leaf_nodes


def stored_fields(structure: dict, names: list[str], leaves: list) -> list[dict]:
    """One entry per leaf; dtype and shape from a sample's leaves [(kind, dtype, array)] when
    given (a folder's images: uint8, shape per image)."""
    out = []
    for i, (name, leaf) in enumerate(zip(names, leaf_nodes(structure), strict=False)):
        dtype, shape = ("uint8" if leaf["kind"] == "image" else "int64"), None
        if i < len(leaves):
            _kind, dtype, arr = leaves[i]
            shape = list(np.shape(arr))
        origin = leaf.get("quant") or leaf.get("cast")
        out.append({"name": name, "kind": leaf["kind"], "dtype": dtype, "from": origin,
                    "shape": shape})  # fmt: skip
    return out


def _shape(shape: Iterable[int] | None) -> str:
    if shape is None:
        return "(shape per sample)"
    return "x".join(map(str, shape)) or "scalar"


def field_lines(stored: list[dict]) -> list[str]:
    """What each field is stored as, one line each; a float field kept as float says so and
    what it costs."""
    lines = []
    for f in stored:
        shape = _shape(f.get("shape"))
        dtype, origin = f["dtype"], f.get("from")
        if origin and dtype == "uint8":
            lines.append(f"{f['name']}: {origin} {shape} on exact k/255 steps, stored as uint8 "
                         f"(1/{np.dtype(origin).itemsize} of the bytes); the reader returns "
                         "uint8 (LMDBDataset(..., floats=True) gives the floats back)")
        elif origin:
            lines.append(f"{f['name']}: {origin} {shape} stored as {dtype} (--floats {dtype}: "
                         "rounded to half precision)")
        elif dtype in ("float32", "float64") and f["kind"] in ("tensor", "ndarray"):
            n = math.prod(f["shape"] or [1])
            size = np.dtype(dtype).itemsize
            lines.append(f"{f['name']}: {dtype} {shape} stored as {dtype}: its values are not on "
                         f"k/255 steps, so {n * size:,} B per sample, {size}x what uint8 "
                         "would take (--floats float16 halves it)")
        else:
            lines.append(f"{f['name']}: {dtype} {shape}")
    return lines
