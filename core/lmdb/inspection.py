"""A look at a source before converting it: count, classes, fields, thumbnails, estimated size.

    info = inspect_source("data/train", Preprocess(resize=256), n_preview=8)
    info.count, info.classes, info.field_info, info.preview, info.estimated_bytes
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from stallscope.core.lmdb.decoder import Decoder, source_desc
from stallscope.core.lmdb.errors import SampleError, SourceError
from stallscope.core.lmdb.factory import FactorySource
from stallscope.core.lmdb.fields import field_lines, stored_fields
from stallscope.core.lmdb.folder import FolderSource
from stallscope.core.lmdb.format import DTYPES, chunk_for, layout_fields, record_size
from stallscope.core.lmdb.images import Preprocess, padded_size, to_display
from stallscope.core.lmdb.notices import empty_classes_line
from stallscope.core.lmdb.source import open_source, open_source_job
from stallscope.core.lmdb.structure import leaf_names

RGB_FIX = "every image as RGB (no --keep-mode)"


@dataclass
class SourceInfo:
    spec: str
    kind: str
    count: int
    classes: list[str]
    fields: list[str]
    field_info: list[str]  # "image: uint8 3x256x256": each field as stored (fields.py)
    structure: dict
    preview: list[tuple[str, np.ndarray]]  # (caption, HWC uint8 image) for thumbnails
    bytes_per_sample: float  # mean stored record size after preprocessing
    estimated_bytes: int  # on disk, with LMDB's page overhead
    notes: list[str]
    shapes: list[tuple[str, int]] = field(default_factory=list)  # first field's, most seen first
    surveyed: int = 0  # samples the shape survey looked at
    suggestion: str = ""  # "--resize 32 --crop 32" when shapes vary
    source: object = field(default=None, repr=False)  # the opened source: pass it on, no rescan
    padded: str = ""  # the crop is larger than some sampled images: what it will do

    @property
    def varied(self) -> bool:
        return len(self.shapes) > 1

    def survey_lines(self, shown: int = 5) -> list[str]:
        """The shape survey, one size a line: '3x48x64: 6 of 12 sampled', most seen first."""
        lines = [f"{shape}: {count} of {self.surveyed} sampled"
                 for shape, count in self.shapes[:shown]]
        rest = self.shapes[shown:]
        if rest:
            lines.append(f"… and {len(rest)} more sizes "
                         f"({sum(c for _s, c in rest)} of {self.surveyed} sampled)")
        return lines

    def shape_line(self) -> str:
        return survey_line(self.fields[0] if self.fields else "value", self.shapes,
                           self.surveyed, self.suggestion)  # fmt: skip


def survey_line(name: str, shapes: list, surveyed: int, suggestion: str,
                exact: dict | None = None) -> str:  # fmt: skip
    """'image: 3x32x32 in all 48 sampled', or the spread and what to do about it. exact: the
    survey of every sample a conversion stored (exact_survey), said as such."""
    if not shapes:
        return ""
    top, count = shapes[0]
    fix = f"convert with {suggestion}, or read" if suggestion else "read"
    stack = f"a DataLoader cannot stack them into batches: {fix} with collate_fn=list"
    if exact is not None:
        given = exact.get("examples")
        examples: dict = given if isinstance(given, dict) else {}
        if len(shapes) == 1 and not exact.get("varied"):
            return f"{name}: {top} in all {surveyed:,} samples"
        if len(shapes) == 1:
            return (f"warning: {name} is {top} in all {surveyed:,} samples, but other fields "
                    f"differ in shape or dtype; {stack}")  # fmt: skip
        sizes = [f"{shape}: {n:,}" + (f" ({examples[shape]})" if i and shape in examples else "")
                 for i, (shape, n) in enumerate(shapes[:4])]  # fmt: skip
        if len(shapes) > 4:
            sizes.append(f"{len(shapes) - 4} more sizes")
        return (f"warning: {name} has {len(shapes):,} sizes in {surveyed:,} samples "
                f"({'; '.join(sizes)}); {stack}")  # fmt: skip
    if len(shapes) == 1:
        return f"{name}: {top} in all {surveyed} sampled"
    return (f"warning: {name} has {len(shapes)} sizes in {surveyed} sampled (most common {top}: "
            f"{count}); {stack}")  # fmt: skip


def exact_survey(layouts: dict[bytes, list[int]], more: int, name_of,
                 keep_mode: bool = False) -> dict:
    """The shape survey of every record a conversion wrote, from the writer's layout counts
    ({format.layout_key: [records, first source index]}; `more`: records in layouts past
    the ones listed): the first field's sizes, most seen first, an example file of each,
    and whether all records stack into one batch ("varied": False)."""
    counted: Counter[str] = Counter()
    first: dict[str, int] = {}
    images: Counter[tuple[int, ...]] = Counter()
    for key, (n, index) in layouts.items():
        fields = layout_fields(key)
        shape = tuple(fields[0][1]) if fields else ()
        text = "x".join(map(str, shape)) or "scalar"
        counted[text] += n
        first[text] = min(first.get(text, index), index)
        if len(shape) == 3:
            images[shape] += n
    suggestion = _fix(images, keep_mode) if len(counted) > 1 or more else ""
    shapes = [[text, n] for text, n in counted.most_common()]
    if more:
        shapes.append(["other sizes", more])
    return {"shapes": shapes, "surveyed": sum(counted.values()) + more,
            "suggestion": suggestion, "exact": True, "varied": len(layouts) > 1 or more > 0,
            "examples": {text: name_of(index) for text, index in first.items()}}  # fmt: skip


def exact_fields(stored: list[dict], layouts: dict[bytes, list[int]], more: int) -> list[dict]:
    """stored_fields with each field's dtype and shape as every record has them: the shape
    when all share one (None: shape per sample), the dtype when all share one."""
    out = [dict(f) for f in stored]
    per_field = [layout_fields(key) for key in layouts]
    for i, f in enumerate(out):
        seen = [fields[i] for fields in per_field if i < len(fields)]
        if not seen:
            continue
        shapes = {tuple(shape) for _dtype, shape in seen}
        dtypes = sorted({dtype for dtype, _shape in seen}, key=DTYPES.index)
        f["shape"] = list(seen[0][1]) if len(shapes) == 1 and not more else None
        f["dtype"] = "/".join(dtypes) if more == 0 or len(dtypes) > 1 else f["dtype"]
    return out


def survey(shapes: list[tuple[int, ...]], keep_mode: bool = False) -> dict:
    """The shape survey as stored in an LMDB's metadata: shapes counted, how many, advice
    (keep_mode: images kept in their own colour modes, --keep-mode)."""
    counted = Counter("x".join(map(str, shape)) or "scalar" for shape in shapes).most_common()
    return {"shapes": [list(c) for c in counted], "surveyed": len(shapes),
            "suggestion": _suggest(shapes, keep_mode)}  # fmt: skip


def inspect_job(spec, pre: Preprocess | None = None, n_preview: int = 6, n_size: int = 48):
    """inspect_source as a job: a folder's scan yields (files found, 0) as it goes."""
    source = spec
    if not isinstance(spec, FolderSource | FactorySource):
        source = yield from open_source_job(spec)
    return inspect_source(source, pre, n_preview, n_size)


def inspect_source(
    spec, pre: Preprocess | None = None, n_preview: int = 6, n_size: int = 48
) -> SourceInfo:
    """Open a source (a spec, or a source already opened: no second scan), decode a few
    samples for a preview and estimate the converted size."""
    pre = pre or Preprocess()
    source = spec if isinstance(spec, FolderSource | FactorySource) else open_source(spec)
    n = len(source)
    if n == 0:
        raise SourceError(f"{source.spec}: the dataset is empty")
    decoder = Decoder(source_desc(source), pre.to_dict(), None)
    notes: list[str] = []
    preview: list = []
    structure: dict | None = None
    first: list = []  # sample 0's leaves, with structure
    sizes: list[int] = []
    shapes: list[tuple[int, ...]] = []
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
            structure = st if isinstance(source, FactorySource) else source.structure
            first = leaves
        sizes.append(record_size([(d, a.shape) for _k, d, a in leaves]))
        shapes.append(tuple(leaves[0][2].shape))
        picture = next((to_display(a) for k, _d, a in leaves if to_display(a) is not None), None)
        if picture is not None and len(preview) < n_preview:
            caption = source.name_of(index)
            if isinstance(source, FolderSource) and source.labels is not None:
                caption = f"{source.classes[source.labels[index]]}/{Path(caption).name}"
            preview.append((index, caption, picture))
    if structure is None:
        raise SourceError(f"{source.spec}: none of the first samples could be read ({notes[0]})")
    if isinstance(source, FolderSource):
        surveyed = header_shapes(source, pre, n_size)
        if surveyed:
            shapes = [shape for shape, _labelled in surveyed]
            sizes = [record_of(shape, labelled) for shape, labelled in surveyed]
        if source.ignored_top_level:
            notes.append(
                f"{source.ignored_top_level} image(s) at the top level are ignored "
                "(ImageFolder layout: only class subfolders count)"
            )
        empty = empty_classes_line(source.empty_classes())
        if empty:
            notes.append(empty.removeprefix("warning: "))
    preview = [(caption, picture) for _i, caption, picture in sorted(preview, key=lambda p: p[0])]
    names = leaf_names(structure) if isinstance(source, FactorySource) else source.fields()
    found = survey(shapes, not pre.rgb)
    stored = stored_fields(structure, names, first)
    if stored and len(found["shapes"]) > 1:  # not sample 0's shape: the survey's spread
        stored[0] = {**stored[0], "shape": None}
    info = field_lines(stored)
    mean = float(np.mean(sizes))
    return SourceInfo(
        source.spec, source.kind, n, list(source.classes), names, info, structure, preview,
        mean, int(n * lmdb_bytes(mean)), notes, [tuple(c) for c in found["shapes"]],
        found["surveyed"], found["suggestion"], source,
        padded_preview(source, pre, n_size) if isinstance(source, FolderSource) else "",
    )  # fmt: skip


def _suggest(shapes: list[tuple[int, ...]], keep_mode: bool = False) -> str:
    """What makes images of several shapes stack: see _fix."""
    if len({*shapes}) <= 1:
        return ""
    return _fix(Counter(s for s in shapes if len(s) == 3), keep_mode)


def _fix(images: Counter, keep_mode: bool) -> str:
    """'--resize S --crop S' from the most common image size (its shorter side) when sizes
    differ; 'every image as RGB (no --keep-mode)' when --keep-mode left them in different
    channel counts (grayscale beside RGB): resizing does not change those."""
    if not images:
        return ""
    parts = []
    if len({shape[1:] for shape in images}) > 1:
        _c, h, w = images.most_common(1)[0][0]
        parts.append(f"--resize {min(h, w)} --crop {min(h, w)}")
    if keep_mode and len({shape[0] for shape in images}) > 1:
        parts.append(f"{RGB_FIX}")
    return " and ".join(parts)


def lmdb_bytes(record: float) -> float:
    """Bytes one sample of this record size takes on disk: records are packed into chunks of
    ~128 KiB (8 bytes each for offset and crc32, at most one part-used 4 KiB page per chunk);
    a record bigger than that is a chunk of its own on whole 4 KiB overflow pages."""
    chunk = chunk_for(record)
    if chunk == 1:
        return float(np.ceil((record + 48) / 4096) * 4096)
    return (record + 8) * (1 + 2048 / (chunk * (record + 8)))


def _spread(n: int, k: int) -> list[int]:
    return sorted(set(np.linspace(0, n - 1, num=min(k, n)).astype(int).tolist()))


def header_sizes(source: FolderSource, pre: Preprocess, k: int) -> list[int]:
    """Record sizes from image headers only (no decoding), for a quick estimate."""
    return [record_of(shape, labelled) for shape, labelled in header_shapes(source, pre, k)]


def record_of(shape: tuple[int, ...], labelled: bool) -> int:
    leaves = [("uint8", shape)] + ([("int64", ())] if labelled else [])
    return record_size(leaves)


def padded_preview(source: FolderSource, pre: Preprocess, k: int) -> str:
    """Before converting: the sampled images (headers only) a crop larger than them would pad
    with black, by size after the resize ('' when the crop fits them all)."""
    if not pre.crop:
        return ""
    sizes: Counter[str] = Counter()
    seen = 0
    for index in _spread(len(source), k):
        try:
            with Image.open(source.root / source.files[index]) as img:
                size = padded_size(pre, *img.size)
        except Exception:  # noqa: BLE001 - a corrupt file is not an image to pad
            continue
        seen += 1
        if size is not None:
            sizes[f"{size[0]}x{size[1]}"] += 1
    if not sizes:
        return ""
    listed = "; ".join(f"{size}: {n}" for size, n in sizes.most_common(4))
    after = " after the resize" if pre.resize else ""
    return (f"the {pre.crop[0]}x{pre.crop[1]} crop is larger than {sum(sizes.values())} of "
            f"{seen} sampled images ({listed}{after}): it will pad them with black; resize to "
            "at least the crop size first")


def header_shapes(source: FolderSource, pre: Preprocess, k: int) -> list[tuple[tuple, bool]]:
    """(stored CHW shape, has a label) of k files spread over the folder, from their headers
    only (no decoding): the shape survey."""
    out = []
    for index in _spread(len(source), k):
        try:
            with Image.open(source.root / source.files[index]) as img:
                w, h = pre.output_size(*img.size)
                bands = 3 if pre.rgb else len(img.getbands())
        except Exception:  # noqa: BLE001 - a corrupt file does not change the estimate
            continue
        out.append(((bands, h, w), source.labels is not None))
    return out
