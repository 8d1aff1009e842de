"""What the wizard and `stallscope-cli convert` suggest around a conversion: the factories a .py
offers, where the LMDB should go, and the reader code to paste into a training script.

    factory_candidates("datasets.py") -> ["make_train_set", "Flowers", ...]
    default_destination(info) -> "/data/train.lmdb"
    code_snippet(dst, info) -> "from torch.utils.data import DataLoader\\n..."
"""

from __future__ import annotations

import ast
from pathlib import Path

from stallscope.core.lmdb.inspection import SourceInfo
from stallscope.core.lmdb.measure import suggest_loader
from stallscope.core.lmdb.structure import describe


def factory_candidates(path: str) -> list[str]:
    """Top-level functions and classes of a .py that can be called without arguments, the
    likeliest factories (names with "make" or "data") first."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            args = node.args
            if len(args.args) - len(args.defaults) == 0 and not args.posonlyargs:
                names.append(node.name)
        elif isinstance(node, ast.ClassDef):
            names.append(node.name)
    public = [n for n in names if not n.startswith("_")]
    return sorted(public, key=lambda n: not any(k in n.lower() for k in ("make", "data")))


def default_destination(info: SourceInfo) -> str:
    """Beside the source: folder `train` -> `train.lmdb`, `ds.py:make` -> `ds_make.lmdb`."""
    if info.kind == "folder":
        root = Path(info.spec)
        return str(root.with_name(root.name + ".lmdb"))
    path, name = info.spec.rsplit(":", 1)
    return str(Path(path).with_name(f"{Path(path).stem}_{name}.lmdb"))


def code_snippet(dst: str, info: SourceInfo | None, num_workers: int | None = None,
                 batch_size: int | None = None, varied: bool | None = None) -> str:
    """A DataLoader over the converted LMDB, unpacked as the source's samples are.

    num_workers/batch_size: what the speed check measured (measure.suggest_loader's for the
    sample size when not given); varied: samples of different shapes (the shape survey's
    verdict when not given), read as lists since they cannot be stacked."""
    if info is None:
        return _snippet(dst, "folder", ["?"], {}, [], 4096, bool(varied), num_workers, batch_size)
    return _snippet(dst, info.kind, info.classes, info.structure, info.field_info,
                    info.bytes_per_sample, info.varied if varied is None else varied,
                    num_workers, batch_size)  # fmt: skip


def lmdb_snippet(dst: str, num_workers: int | None = None, batch_size: int | None = None) -> str:
    """The snippet for what an LMDB holds (its metadata and a look at its samples' shapes)."""
    from stallscope.core.lmdb.dataset import LMDBDataset
    from stallscope.core.lmdb.fields import field_lines
    from stallscope.core.lmdb.measure import same_shapes

    ds = LMDBDataset(dst)
    try:
        meta = ds.meta
        varied = not same_shapes(ds)
        per_sample = sum(a.nbytes for a in ds.arrays(0)[1]) if len(ds) else 4096
    finally:
        ds.close()
    return _snippet(dst, meta["source"]["kind"], meta.get("classes", []), meta["structure"],
                    field_lines(meta.get("stored", [])), per_sample, varied, num_workers,
                    batch_size)  # fmt: skip


def _snippet(dst: str, kind: str, classes: list[str], structure: dict, field_info: list[str],
             sample_bytes: float, varied: bool, num_workers: int | None,
             batch_size: int | None) -> str:  # fmt: skip
    suggested = suggest_loader(sample_bytes)
    workers = suggested[0] if num_workers is None else num_workers
    batch = suggested[1] if batch_size is None else batch_size
    scale = "    images = images.to(device, non_blocking=True).float().div_(255)"
    comment = "    # uint8 CHW batches; scale on the GPU, not in the workers"
    if kind == "factory":
        unpack = "for sample in loader:"
        comment = f"    # same structure as your dataset: {describe(structure)}"
        use = "    ..."
        if any(" stored as uint8" in line for line in field_info):
            use = ("    # k/255 floats are stored (and returned) as uint8: on the GPU,\n"
                   "    # x = x.to(device, non_blocking=True).float().div_(255)\n    ...")
    elif not classes:
        unpack, use = "for images in loader:", scale
    else:
        unpack, use = "for images, labels in loader:", scale
    if varied:
        unpack = "for batch in loader:"
        comment = ("    # sizes vary, so each batch is a list of samples (convert with "
                   "--resize/--crop to get stacked batches)")
        use = "    ..."
    persistent = ",\n                    persistent_workers=True" if workers > 0 else ""
    collate = ",\n                    collate_fn=list" if varied else ""
    return "\n".join([
        "import torch",
        "from torch.utils.data import DataLoader",
        "from stallscope.core.lmdb.dataset import LMDBDataset",
        "",
        "# the GPU when there is one; pinned memory only helps (and only works) with one",
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")',
        "# opened lazily in each worker, readonly, lock-free; readahead on while it fits in",
        "# memory (LMDBDataset(..., readahead=False) for an LMDB far larger than RAM)",
        f"dataset = LMDBDataset({str(dst)!r})",
        f"loader = DataLoader(dataset, batch_size={batch}, shuffle=True, "
        f"num_workers={workers},",
        f"                    pin_memory=device.type == \"cuda\"{persistent}{collate})",
        unpack,
        comment,
        use,
    ])  # fmt: skip
