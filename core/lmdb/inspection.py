"""A look at a source before converting it: count, classes, fields, thumbnails, estimated size.

    info = inspect_source("data/train", Preprocess(resize=256), n_preview=8)
    info.count, info.classes, info.field_info, info.preview, info.estimated_bytes
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from stallscope.core.lmdb.format import record_size
from stallscope.core.lmdb.images import Preprocess, to_display
from stallscope.core.lmdb.source import (
    Decoder,
    FolderSource,
    SampleError,
    SourceError,
    leaf_names,
    open_source,
    source_desc,
)


@dataclass
class SourceInfo:
    spec: str
    kind: str
    count: int
    classes: list[str]
    fields: list[str]
    field_info: list[str]  # "image: uint8 3x256x256" for the first readable sample
    structure: dict
    preview: list[tuple[str, np.ndarray]]  # (caption, HWC uint8 image) for thumbnails
    bytes_per_sample: float  # mean stored record size after preprocessing
    estimated_bytes: int  # on disk, with LMDB's page overhead
    notes: list[str]


def inspect_source(
    spec: str | os.PathLike, pre: Preprocess | None = None, n_preview: int = 6, n_size: int = 48
) -> SourceInfo:
    """Open a source, decode a few samples for a preview and estimate the converted size."""
    pre = pre or Preprocess()
    source = open_source(spec)
    n = len(source)
    if n == 0:
        raise SourceError(f"{source.spec}: the dataset is empty")
    decoder = Decoder(source_desc(source), pre.to_dict(), None)
    notes: list[str] = []
    preview: list = []
    structure, first = None, None
    sizes: list[int] = []
    candidates = dict.fromkeys(_spread(n, max(n_preview, 1)) + _spread(n, 3 * n_preview + 3))
    for index in candidates:  # spread over the classes; more tries if some are unreadable
        if len(preview) >= n_preview and structure is not None:
            break
        entry = source.task(index, index + 1)[0]
        try:
            _, st, leaves = decoder.sample(entry)
        except SampleError as exc:
            notes.append(f"{source.name_of(index)}: {exc}")
            continue
        if structure is None:
            structure = st if source.kind == "factory" else source.structure
            first = leaves
        sizes.append(record_size([(d, a.shape) for _k, d, a in leaves]))
        picture = next((to_display(a) for k, _d, a in leaves if to_display(a) is not None), None)
        if picture is not None and len(preview) < n_preview:
            caption = source.name_of(index)
            if isinstance(source, FolderSource) and source.labels is not None:
                caption = f"{source.classes[source.labels[index]]}/{Path(caption).name}"
            preview.append((index, caption, picture))
    if structure is None:
        raise SourceError(f"{source.spec}: none of the first samples could be read ({notes[0]})")
    if isinstance(source, FolderSource):
        sizes = header_sizes(source, pre, n_size) or sizes
        if source.ignored_top_level:
            notes.append(
                f"{source.ignored_top_level} image(s) at the top level are ignored "
                "(ImageFolder layout: only class subfolders count)"
            )
    preview = [(caption, picture) for _i, caption, picture in sorted(preview, key=lambda p: p[0])]
    names = leaf_names(structure) if source.kind == "factory" else source.fields()
    info = [
        f"{name}: {kind} {d} {'x'.join(map(str, a.shape)) or 'scalar'}"
        for name, (kind, d, a) in zip(names, first, strict=False)
    ]
    mean = float(np.mean(sizes))
    return SourceInfo(
        source.spec, source.kind, n, list(source.classes), names, info, structure, preview,
        mean, int(n * lmdb_bytes(mean)), notes,
    )  # fmt: skip


def lmdb_bytes(record: float) -> float:
    """Bytes a value of this size takes in LMDB: big values live on whole 4 KiB overflow pages."""
    if record > 2000:
        return float(np.ceil((record + 16) / 4096) * 4096)
    return record * 1.4 + 24  # leaf pages are ~70% full after appends


def _spread(n: int, k: int) -> list[int]:
    return sorted(set(np.linspace(0, n - 1, num=min(k, n)).astype(int).tolist()))


def header_sizes(source: FolderSource, pre: Preprocess, k: int) -> list[int]:
    """Record sizes from image headers only (no decoding), for a quick estimate."""
    out = []
    for index in _spread(len(source), k):
        try:
            with Image.open(source.root / source.files[index]) as img:
                w, h = pre.output_size(*img.size)
                bands = 3 if pre.rgb else len(img.getbands())
        except Exception:  # noqa: BLE001 - a corrupt file does not change the estimate
            continue
        leaves = [("uint8", (bands, h, w))]
        if source.labels is not None:
            leaves.append(("int64", ()))
        out.append(record_size(leaves))
    return out
