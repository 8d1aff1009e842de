"""The converter's plain-PNG path (core/lmdb/png.py, Decoder._decode_folder): for every file
it gives the record Image.open would give (the same bytes, or the same skip reason), and it
really is the path taken for plain PNGs; the writer's chunks from whole runs of records."""

from __future__ import annotations

import io
import os
import struct
import zlib
from pathlib import Path

import lmdb
import numpy as np
import pytest
from PIL import Image, PngImagePlugin

from stallscope.core.jobs import run_job
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb import png
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.decoder import Decoder, encode
from stallscope.core.lmdb.errors import SampleError
from stallscope.core.lmdb.images import Preprocess


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    out, pos = [], 8
    while pos < len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        out.append((data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]))
        pos += 12 + length
    return out


def _assemble(chunks: list[tuple[bytes, bytes]]) -> bytes:
    parts = [png.SIGNATURE]
    for cid, body in chunks:
        parts += [struct.pack(">I", len(body)), cid, body,
                  struct.pack(">I", zlib.crc32(cid + body))]  # fmt: skip
    return b"".join(parts)


def _saved(img: Image.Image, **kw) -> bytes:
    out = io.BytesIO()
    img.save(out, "PNG", **kw)
    return out.getvalue()


def _images() -> dict[str, bytes]:
    """PNGs of every kind the fast path takes or must leave to PIL."""
    rng = np.random.default_rng(7)
    out: dict[str, bytes] = {}
    smooth = (np.add.outer(np.arange(37), np.arange(23))[:, :, None] * [3, 5, 7]) % 256
    noise = rng.integers(0, 256, (31, 17, 3), dtype=np.uint8)
    for name, arr in (("smooth", smooth.astype(np.uint8)), ("noise", noise)):
        for level in (0, 1, 6, 9):  # different levels pick different row filters
            rgb = Image.fromarray(arr)
            out[f"{name}-rgb-{level}.png"] = _saved(rgb, compress_level=level)
            out[f"{name}-l-{level}.png"] = _saved(rgb.convert("L"), compress_level=level)
            out[f"{name}-rgba-{level}.png"] = _saved(rgb.convert("RGBA"), compress_level=level)
    out["tiny-1x1.png"] = _saved(Image.new("RGB", (1, 1), (1, 2, 3)))
    out["wide-300x2.png"] = _saved(Image.fromarray(rng.integers(0, 256, (2, 300, 3), np.uint8)))
    out["big-160x120.png"] = _saved(Image.fromarray(rng.integers(0, 256, (120, 160, 3), np.uint8)))
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "plain text chunk")
    out["text.png"] = _saved(Image.fromarray(noise), pnginfo=info, dpi=(72, 72))
    # what the fast path leaves to PIL
    out["palette.png"] = _saved(Image.fromarray(noise).quantize(16))
    out["bilevel.png"] = _saved(Image.fromarray(noise).convert("1"))
    out["la.png"] = _saved(Image.fromarray(noise).convert("LA"))
    out["i16.png"] = _saved(Image.fromarray(noise[:, :, 0].astype(np.uint16) * 257))
    out["rgb-trns.png"] = _saved(Image.fromarray(noise), transparency=(1, 2, 3))
    zinfo = PngImagePlugin.PngInfo()
    zinfo.add_text("Comment", "compressed", zip=True)
    out["ztxt.png"] = _saved(Image.fromarray(noise), pnginfo=zinfo)
    chunks = _chunks(out["noise-rgb-6.png"])
    idat = b"".join(body for cid, body in chunks if cid == b"IDAT")
    head = [c for c in chunks if c[0] == b"IHDR"]
    # several IDAT chunks (taken), interlaced (left to PIL: header patched, data as is)
    out["split-idat.png"] = _assemble(head + [(b"IDAT", idat[i : i + 100])
                                              for i in range(0, len(idat), 100)]
                                      + [(b"IEND", b"")])  # fmt: skip
    ihdr = bytearray(head[0][1])
    ihdr[12] = 1
    out["interlaced.png"] = _assemble([(b"IHDR", bytes(ihdr)), (b"IDAT", idat), (b"IEND", b"")])
    return out


FAST = {name for name in _images() if not name.startswith((
    "palette", "bilevel", "la.", "i16", "rgb-trns", "ztxt", "interlaced"))}  # fmt: skip


def _damaged() -> dict[str, bytes]:
    """A small PNG cut at every length and with single bytes changed everywhere."""
    good = _saved(Image.fromarray(np.random.default_rng(3).integers(0, 256, (6, 5, 3), np.uint8)))
    out = {f"cut-{k:03d}.png": good[:k] for k in range(0, len(good), 3)}
    for k in range(8, len(good)):
        bad = bytearray(good)
        bad[k] ^= 0x5A
        out[f"flip-{k:03d}.png"] = bytes(bad)
    return out


def _folder(tmp_path: Path, files: dict[str, bytes]) -> list[tuple[int, str, int]]:
    (tmp_path / "a").mkdir()
    task = []
    for i, (name, data) in enumerate(sorted(files.items())):
        (tmp_path / "a" / name).write_bytes(data)
        task.append((i, str(tmp_path / "a" / name), i % 3))
    return task


def pil_records(decoder: Decoder, task: list) -> list[tuple[int, bytes | None, str]]:
    """Each entry through Image.open (Decoder.sample), as records."""
    out: list[tuple[int, bytes | None, str]] = []
    for entry in task:
        try:
            _, _, leaves = decoder.sample(entry)
        except SampleError as exc:
            out.append((entry[0], None, str(exc)))
            continue
        header, offsets, size = fmt.plan(entry[0], [(d, a.shape) for _k, d, a in leaves])
        buf = bytearray(size)
        fmt.write(memoryview(buf), 0, header, offsets, [a for _k, _d, a in leaves])
        out.append((entry[0], bytes(buf), ""))
    return out


def task_records(decoder: Decoder, task: list) -> list[tuple[int, bytes | None, str]]:
    """The task through Decoder.decode + encode, as the workers run it, split back into
    records (crc32 checked)."""
    enc = encode(decoder.decode(task), lambda n: (memoryview(bytearray(n)), None))
    sizes = np.frombuffer(enc.sizes, np.int64)
    crcs = np.frombuffer(enc.crcs, "<u4")
    assert enc.nbytes == int(sizes.sum())
    skipped = dict(enc.skips)
    out: list[tuple[int, bytes | None, str]] = []
    data, pos, k = bytes(enc.where), 0, 0
    for index, _path, _label in task:
        if index in skipped:
            out.append((index, None, skipped[index]))
            continue
        record = data[pos : pos + int(sizes[k])]
        assert zlib.crc32(record) == crcs[k]
        out.append((index, record, ""))
        pos += int(sizes[k])
        k += 1
    assert enc.stop == task[-1][0] + 1
    return out


PRES = [
    Preprocess(),
    Preprocess(rgb=False),
    Preprocess(resize=12),
    Preprocess(resize=(20, 10), crop=(8, 8)),
    Preprocess(resize=17, crop=(17, 31), rgb=False),  # a no-op for the 17x31 images only
]


@pytest.mark.parametrize("pre", PRES, ids=lambda p: p.describe())
def test_every_kind_of_png_gives_the_record_image_open_gives(tmp_path, pre):
    files = _images()
    task = _folder(tmp_path, files)
    decoder = Decoder({"kind": "folder", "spec": str(tmp_path)}, pre.to_dict(), None)
    assert task_records(decoder, task) == pil_records(decoder, task)
    for _index, path, _label in task:  # and the plain ones really took the fast path
        taken = png.parse(png.read_file(path)) is not None
        assert taken == (Path(path).name in FAST), path


def test_damaged_pngs_are_skipped_or_kept_as_image_open_decides(tmp_path):
    files = _damaged()
    task = _folder(tmp_path, files)
    decoder = Decoder({"kind": "folder", "spec": str(tmp_path)}, Preprocess().to_dict(), None)
    fast, slow = task_records(decoder, task), pil_records(decoder, task)
    assert fast == slow
    assert sum(r is None for _i, r, _w in fast) > len(files) // 2  # most are refused
    assert any(r is not None for _i, r, _w in fast)


def test_fast_pixels_are_image_open_pixels():
    for name in sorted(FAST):
        data = _images()[name]
        plain = png.parse(data)
        assert plain is not None, name
        pixels = png.decode_group([plain, plain])
        assert pixels is not None
        with Image.open(io.BytesIO(data)) as img:
            want = np.asarray(img)
        want = want.reshape(*want.shape[:2], -1)
        assert pixels.shape == (2, *want.shape) and (pixels == want).all(), name


def test_a_fifo_is_an_error_not_a_wait(tmp_path):
    os.mkfifo(tmp_path / "x.png")
    with pytest.raises(OSError, match="not a regular file"):
        png.read_file(str(tmp_path / "x.png"))


def test_a_file_that_grows_is_read_whole(tmp_path, monkeypatch):
    path = tmp_path / "x.png"
    path.write_bytes(b"a" * 10)
    real = os.fstat

    def stale(fd):  # the size of an older version of the file
        st = real(fd)
        return os.stat_result((st.st_mode, *tuple(st)[1:6], 4, *tuple(st)[7:10]))

    monkeypatch.setattr(os, "fstat", stale)
    assert png.read_file(str(path)) == b"a" * 10


@pytest.mark.runner  # decoding workers
@pytest.mark.parametrize("workers", [0, 2])
def test_a_conversion_splits_runs_of_records_into_the_same_chunks(tmp_path, workers):
    """Tasks of 5 cut into chunks of ~7 (18 KB records) with skips between: every chunk holds
    its records, ends and crc32s as if packed one by one, whatever the commit points."""
    root = tmp_path / "src"
    rng = np.random.default_rng(5)
    for c in range(3):
        (root / f"k{c}").mkdir(parents=True)
        for i in range(40):
            arr = rng.integers(0, 256, (76 + i % 3, 80, 3), np.uint8)
            data = _saved(Image.fromarray(arr))
            (root / f"k{c}" / f"{i:03d}.png").write_bytes(data[:300] if i % 11 == 4 else data)
    dst = tmp_path / "o.lmdb"
    run_job(convert(root, dst, workers=workers, chunk=5, commit_every=13))
    ds = LMDBDataset(dst, verify_reads=True)
    assert len(ds) == 3 * (40 - 4) and 4 <= ds.chunk <= 9
    env = lmdb.open(str(dst), readonly=True, lock=False)
    with env.begin() as txn:
        for c in range((len(ds) + ds.chunk - 1) // ds.chunk):
            value = txn.get(fmt.sample_key(c))
            assert fmt.chunk_problem(value) == ""
            records = [bytes(r) for r, crc in fmt.chunk_records(value) if fmt.crc_ok(r, crc)]
            assert len(records) == min(ds.chunk, len(ds) - c * ds.chunk)
    env.close()
    for k in range(len(ds)):
        image, label = ds[k]
        index = ds.source_index(k)
        name = f"k{index // 40}/{index % 40:03d}.png"
        with Image.open(root / name) as img:
            assert image.numpy().tobytes() == np.asarray(img).transpose(2, 0, 1).tobytes()
        assert label == index // 40
    ds.close()
