"""What a conversion settles from its source before writing: the structure every sample must
share (with which float fields are stored as uint8) and the mean record size."""

from __future__ import annotations

from stallscope.core.lmdb.decoder import Decoder, source_desc
from stallscope.core.lmdb.errors import SampleError, SourceError
from stallscope.core.lmdb.flatten import common_structure
from stallscope.core.lmdb.folder import FolderSource
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.inspection import header_shapes, inspect_source, record_of
from stallscope.core.lmdb.source import Source

PROBE = 8  # readable samples that settle the structure (and which floats are k/255)


def settle_structure(source: Source, pre: Preprocess) -> tuple[dict, list, list]:
    """(structure, sample 0's leaves, shapes surveyed). Every sample must share the structure;
    for a factory it is settled on the first few readable samples (a float field is stored as
    uint8 only when all of them are on k/255 steps). Folders: image shapes from 48 headers
    spread over the folder."""
    if isinstance(source, FolderSource):
        return source.structure, [], [shape for shape, _ in header_shapes(source, pre, 48)]
    decoder = Decoder(source_desc(source), pre.to_dict(), None)
    errors: list[str] = []
    found: list[tuple[dict, list]] = []
    for index in range(min(len(source), 2 * PROBE)):
        try:
            _, st, leaves = decoder.sample(index)
            assert st is not None  # a factory's sample carries its own structure
            found.append((st, leaves))
        except SampleError as exc:
            errors.append(f"[{index}] {exc}")
        if len(found) >= PROBE:
            break
    if not found:
        raise SourceError(f"{source.spec}: the first samples cannot be read: {errors[0]}")
    structure = found[0][0]
    for other, _leaves in found[1:]:
        structure = common_structure(structure, other)
    return structure, found[0][1], [tuple(leaves[0][2].shape) for _s, leaves in found if leaves]


def record_estimate(source: Source, pre: Preprocess, shapes: list) -> int:
    """Mean record size from the surveyed image headers (folders) or a few decoded samples."""
    if isinstance(source, FolderSource):
        sizes = [record_of(shape, source.labels is not None) for shape in shapes]
        if sizes:
            return int(sum(sizes) / len(sizes))
    return int(inspect_source(source, pre, n_preview=2, n_size=4).bytes_per_sample)
