"""A sample flattened for storage: its structure (structure.py) and its leaves, each a
(kind, dtype, C-order array). PIL images become CHW uint8 arrays after the fixed preprocessing;
float tensors and arrays on k/255 steps are stored as uint8 (see flatten). Needs no torch
unless the sample holds tensors."""

from __future__ import annotations

import sys

import numpy as np
from PIL import Image

from stallscope.core.lmdb.errors import SampleError
from stallscope.core.lmdb.format import DTYPE_CODE
from stallscope.core.lmdb.images import Preprocess, image_to_chw, preprocess_image

MAX_DEPTH = 32  # nesting of tuples/lists/dicts in one sample


def flatten(item, pre: Preprocess, reference: dict | None = None):
    """A sample -> (structure, leaves [(kind, dtype, array)]). Raises SampleError.

    Float tensors and arrays whose values all lie on k/255 steps (a ToTensor() image) are stored
    as uint8 k, their leaf marked {"quant": original dtype}; with a reference structure (the
    one the conversion settled on) each leaf follows it: quantized where the reference is, a
    sample that is not on those steps is refused (SampleError) rather than rounded."""
    leaves: list[tuple[str, str, np.ndarray]] = []
    structure = _flatten(item, pre, leaves, "sample", reference, 0)
    return structure, leaves


def common_structure(a: dict, b: dict) -> dict:
    """a, keeping a float leaf's uint8 storage only where b has it too (the structure a
    conversion settles on from its first samples)."""
    if a.get("type") != b.get("type") or len(a.get("items", ())) != len(b.get("items", ())):
        return a  # a different structure: that sample is refused when it is converted
    if a["type"] == "leaf":
        return a if "quant" in b or "quant" not in a else {k: v for k, v in a.items()
                                                          if k != "quant"}  # fmt: skip
    items = [common_structure(x, y) for x, y in zip(a["items"], b["items"], strict=True)]
    return dict(a, items=items)


def _flatten(obj, pre, leaves, where, ref, depth) -> dict:
    if depth > MAX_DEPTH:
        raise SampleError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(obj, tuple | list):
        kind = "tuple" if isinstance(obj, tuple) else "list"
        subs = _ref_items(ref, kind, len(obj))
        items = [_flatten(v, pre, leaves, f"{where}[{i}]", subs[i], depth + 1)
                 for i, v in enumerate(obj)]  # fmt: skip
        return {"type": kind, "items": items}
    if isinstance(obj, dict):
        keys = list(obj)
        if not all(isinstance(k, str) for k in keys):
            raise SampleError(f"{where}: dict keys must be str, got {_short(keys)}")
        subs = _ref_items(ref, "dict", len(keys))
        items = [_flatten(obj[k], pre, leaves, f"{where}[{_short(k)}]", subs[i], depth + 1)
                 for i, k in enumerate(keys)]  # fmt: skip
        return {"type": "dict", "keys": keys, "items": items}
    kind, dtype, arr = _leaf(obj, pre, where)
    leaf = {"type": "leaf", "kind": kind}
    if kind in ("tensor", "ndarray") and dtype in ("float16", "float32", "float64"):
        dtype, arr, mark = _store_float(arr, pre, where, ref)
        leaf.update(mark)
    leaves.append((kind, dtype, arr))
    return leaf


def _ref_items(ref: dict | None, kind: str, n: int) -> list:
    if ref is not None and ref.get("type") == kind and len(ref.get("items", ())) == n:
        return ref["items"]
    return [None] * n


def _short(obj) -> str:
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."


def on_255_steps(arr: np.ndarray) -> np.ndarray | None:
    """uint8 k when every value is exactly k/255 as float division gives it, else None."""
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.rint(arr.astype(np.float64) * 255.0)
        if arr.size and not (scaled.min() >= 0 and scaled.max() <= 255):
            return None
        q = scaled.astype(np.uint8)
        back = q.astype(arr.dtype) / arr.dtype.type(255)
    return q if back.tobytes() == arr.tobytes() else None


def _store_float(arr: np.ndarray, pre: Preprocess, where: str, ref: dict | None):
    """(stored dtype, array, leaf marks) for a float leaf, by pre.floats and the reference."""
    name = arr.dtype.name
    if pre.floats == "float16":
        return "float16", arr.astype(np.float16), {"cast": name}
    if pre.floats == "float32" or (ref is not None and "quant" not in ref):
        return name, arr, {}
    q = on_255_steps(arr)
    if q is None:
        if ref is not None:
            raise SampleError(
                f"{where}: values are not on 1/255 steps like the first samples' (stored "
                "as uint8); convert with --floats float32 to keep every float"
            )
        return name, arr, {}
    return "uint8", q, {"quant": name}


def _leaf(obj, pre, where) -> tuple[str, str, np.ndarray]:
    if isinstance(obj, Image.Image):
        dtype, arr = image_to_chw(preprocess_image(obj, pre))
        return "image", dtype, arr
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return "tensor", "bfloat16", t.view(torch.int16).numpy().view(np.uint16)
        try:
            arr = t.numpy()
        except (TypeError, RuntimeError) as exc:
            raise SampleError(f"{where}: a {t.dtype} tensor cannot be stored ({exc})") from exc
        return "tensor", _dtype_name(arr, where), arr
    if isinstance(obj, bool | np.bool_):
        return "bool", "bool", np.asarray(obj, dtype=np.bool_)
    if isinstance(obj, int | np.integer):
        try:
            arr = np.asarray(obj, dtype=obj.dtype if isinstance(obj, np.integer) else np.int64)
        except OverflowError as exc:
            raise SampleError(f"{where}: the int {_short(obj)} does not fit in 64 bits") from exc
        return "int", _dtype_name(arr, where), arr
    if isinstance(obj, float | np.floating):
        arr = np.asarray(obj, dtype=obj.dtype if isinstance(obj, np.floating) else np.float64)
        return "float", _dtype_name(arr, where), arr
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise SampleError(f"{where}: an array of Python objects cannot be stored")
        arr = np.ascontiguousarray(obj)
        return "ndarray", _dtype_name(arr, where), arr
    if isinstance(obj, str):
        # surrogatepass: a lone surrogate (an undecodable file name) round-trips exactly
        return "str", "uint8", np.frombuffer(obj.encode("utf-8", "surrogatepass"), np.uint8)
    raise SampleError(
        f"{where} is a {type(obj).__name__}; only tensors, arrays, PIL images, numbers and str "
        "(or tuples/lists/dicts of them) can be stored"
    )


def _dtype_name(arr: np.ndarray, where: str) -> str:
    name = arr.dtype.name
    if name not in DTYPE_CODE or arr.dtype.byteorder == ">":
        raise SampleError(f"{where} has dtype {arr.dtype}, which cannot be stored")
    return name
