"""LMDBDataset and the record format: DataLoader workers under fork and spawn, pickling,
tensor dtypes (bfloat16 included), alignment, and refusal of LMDBs that are not ours. torch is
imported by the tests that read tensors, not at collection."""

from __future__ import annotations

import pickle
import textwrap
from pathlib import Path

import lmdb
import numpy as np
import pytest
from PIL import Image

from stallscope.core.errors import StallscopeError
from stallscope.core.jobs import run_job
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.images import Preprocess


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> tuple[Path, Path, list[tuple[Path, int]]]:
    """Two classes of JPEG/PNG images of different sizes, resized + cropped to 8x8."""
    base = tmp_path_factory.mktemp("reader")
    root = base / "src"
    rng = np.random.default_rng(7)
    files = []
    for label, cls in enumerate(("n01", "n02")):
        (root / cls).mkdir(parents=True)
        for i in range(12):
            path = root / cls / f"{i:02d}.{'jpg' if i % 2 else 'png'}"
            Image.fromarray(rng.integers(0, 256, (9 + i, 11 + 2 * i, 3), np.uint8)).save(path)
            files.append((path, label))
    dst = base / "reader.lmdb"
    run_job(convert(root, dst, workers=2, preprocess=Preprocess(resize=8, crop=(8, 8))))
    return root, dst, files


def expected(files) -> tuple[np.ndarray, np.ndarray]:
    images = []
    for path, _label in files:
        img = Image.open(path).convert("RGB")
        w, h = img.size
        size = (8, int(8 * h / w)) if w <= h else (int(8 * w / h), 8)
        img = img.resize(size, Image.BILINEAR)
        w, h = img.size
        left, top = round((w - 8) / 2), round((h - 8) / 2)
        images.append(np.asarray(img.crop((left, top, left + 8, top + 8))).transpose(2, 0, 1))
    return np.stack(images), np.array([label for _p, label in files])


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.runner  # DataLoader worker processes
def test_dataloader_with_two_workers_reads_every_sample_once(converted, context):
    import torch
    from torch.utils.data import DataLoader

    _root, dst, files = converted
    ds = LMDBDataset(dst)
    ds[0]  # opened in the parent first: a forked worker must not reuse this handle
    loader = DataLoader(ds, batch_size=5, num_workers=2, multiprocessing_context=context)
    images, labels = zip(*loader, strict=True)
    images, labels = torch.cat(images).numpy(), torch.cat(labels).numpy()
    want_images, want_labels = expected(files)
    assert images.dtype == np.uint8 and images.shape == (24, 3, 8, 8)
    assert np.array_equal(labels, want_labels)
    assert images.tobytes() == want_images.tobytes()
    ds.close()


@pytest.mark.runner  # reopens the pickled dataset in a child process
def test_pickles_without_its_environment_and_reopens(converted):
    import torch

    _root, dst, _files = converted
    ds = LMDBDataset(dst, transform=None, readahead=True)
    first = ds[3]
    blob = pickle.dumps(ds)
    assert len(blob) < 4000  # metadata only, no environment or data
    clone = pickle.loads(blob)
    assert clone._env is None and len(clone) == len(ds) == 24
    again = clone[3]
    assert torch.equal(again[0], first[0]) and again[1] == first[1]
    ds.close()
    clone.close()


@pytest.mark.runner  # the converted fixture decodes in worker processes
def test_samples_are_owned_writable_tensors_and_transform_applies_to_the_image(converted):
    import torch

    _root, dst, _files = converted
    ds = LMDBDataset(dst, transform=lambda t: t.float() / 255)
    image, label = ds[-1]
    assert image.dtype == torch.float32 and float(image.max()) <= 1.0 and label == 1
    raw = LMDBDataset(dst)
    t, _ = raw[0]
    t.zero_()  # in place: must not touch the (read-only) map, nor later reads
    assert raw[0][0].sum() > 0
    with pytest.raises(IndexError):
        raw[24]
    ds.close()
    raw.close()


FACTORY = textwrap.dedent(
    """
    import torch

    class Tensors:
        def __len__(self):
            return 6

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return (
                torch.randn(2, 3, generator=g).to(torch.bfloat16),
                torch.randint(0, 9, (4,), generator=g, dtype=torch.int16),
                [torch.rand(5, generator=g, dtype=torch.float64), i * 0.5, i % 2 == 0],
            )

    make = Tensors
    """
)


def test_factory_tensors_keep_their_dtypes_shapes_and_nesting(tmp_path):
    import torch

    (tmp_path / "tens.py").write_text(FACTORY)
    spec = f"{tmp_path / 'tens.py'}:make"
    run_job(convert(spec, tmp_path / "t.lmdb", workers=0))
    import importlib.util

    mod_spec = importlib.util.spec_from_file_location("tens_ref", tmp_path / "tens.py")
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    source = mod.Tensors()
    ds = LMDBDataset(tmp_path / "t.lmdb")
    assert len(ds) == 6 and ds.fields == ["0", "1", "2.0", "2.1", "2.2"]
    for i in range(6):
        got, want = ds[i], source[i]
        assert isinstance(got, tuple) and isinstance(got[2], list)
        assert got[0].dtype == torch.bfloat16 and torch.equal(got[0], want[0])
        assert got[1].dtype == torch.int16 and torch.equal(got[1], want[1])
        assert got[2][0].dtype == torch.float64 and torch.equal(got[2][0], want[2][0])
        assert got[2][1] == want[2][1] and got[2][2] is want[2][2]
    ds.close()


def encode_arrays(source_index: int, arrays: list[tuple[str, np.ndarray]]) -> bytearray:
    """A record from [(dtype name, array)], as the converter's plan + write make it."""
    header, offsets, size = fmt.plan(source_index, [(d, a.shape) for d, a in arrays])
    buf = bytearray(size)
    fmt.write(memoryview(buf), 0, header, offsets, [a for _d, a in arrays])
    return buf


def test_record_format_round_trips_every_dtype_with_aligned_fields():
    arrays = [
        ("uint8", np.arange(7, dtype=np.uint8)),
        ("float32", np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)),
        ("int64", np.asarray(-5, np.int64)),
        ("bool", np.array([True, False, True])),
        ("float16", np.ones((2, 2, 2), np.float16)),
        ("uint16", np.arange(5, dtype=np.uint16)),
    ]
    record = encode_arrays(123, arrays)
    source_index, views = fmt.parse(record)
    assert source_index == 123 and [v.dtype for v in views] == [d for d, _a in arrays]
    for (_dtype, arr), view in zip(arrays, views, strict=True):
        assert view.offset % fmt.ALIGN == 0
        got = fmt.view_array(record, view)
        assert got.shape == arr.shape and got.tobytes() == arr.tobytes()
    assert len(record) == fmt.record_size([(d, a.shape) for d, a in arrays])
    with pytest.raises(fmt.FormatError):
        fmt.parse(b"XXXX" + record[4:])
    with pytest.raises(fmt.FormatError):
        fmt.parse(record[:40])


def test_refuses_lmdbs_that_are_not_stallscope(tmp_path):
    env = lmdb.open(str(tmp_path / "plain"))
    with env.begin(write=True) as txn:
        txn.put(b"!meta", b'{"format": "something-else"}')
    env.close()
    with pytest.raises(StallscopeError, match="did not write"):
        LMDBDataset(tmp_path / "plain")
    with pytest.raises(StallscopeError, match="no such LMDB"):
        LMDBDataset(tmp_path / "missing")
