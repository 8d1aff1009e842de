"""LMDB format 2 on real conversions: compact chunks (bytes on disk per sample), k/255 floats
stored as uint8, format 1 LMDBs still read, batched reads (__getitems__, the batch_sampler
path) equal to sample-by-sample reads, verify_reads, and one stat per source file."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import lmdb
import numpy as np
import pytest
import torch
from image_folders import noise_classes
from PIL import Image
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

from stallscope.core import cli
from stallscope.core.errors import Cancelled, StallscopeError
from stallscope.core.jobs import CancelFlag, run_job
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.verify import check_records, verify

TINY = textwrap.dedent(
    """
    import numpy as np
    import torch

    N = int(open(__file__.replace(".py", ".n")).read())
    SIDE = int(open(__file__.replace(".py", ".side")).read())

    def pixels(i):
        return np.random.default_rng(i).integers(0, 256, (3, SIDE, SIDE), dtype=np.uint8)

    class Tiny:
        def __len__(self):
            return N

        def __getitem__(self, i):
            return torch.from_numpy(pixels(i)), i % 1000

    class ToTensorLike:
        # what torchvision's ToTensor() gives: float32 on exact k/255 steps
        def __len__(self):
            return N

        def __getitem__(self, i):
            return torch.from_numpy(pixels(i)).float() / 255, i % 10

    class Noise:
        def __len__(self):
            return N

        def __getitem__(self, i):
            return torch.from_numpy(np.random.default_rng(i).random((3, SIDE, SIDE),
                                                                    dtype=np.float32))

    class LaterNotOnSteps:
        def __len__(self):
            return N

        def __getitem__(self, i):
            x = torch.from_numpy(pixels(i)).float() / 255
            return x + 0.001 if i == N - 1 else x
    """
)


def factory(folder: Path, n: int, side: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.py").write_text(TINY)
    (folder / "tiny.n").write_text(str(n))
    (folder / "tiny.side").write_text(str(side))
    return folder / "tiny.py"


def pixels(i: int, side: int) -> np.ndarray:
    return np.random.default_rng(i).integers(0, 256, (3, side, side), dtype=np.uint8)


@pytest.mark.parametrize("side, n, limit", [(16, 20_000, 1.15), (32, 4_000, 1.10)])
@pytest.mark.runner  # decoding workers (a process pool)
def test_tiny_images_cost_close_to_their_pixel_bytes(tmp_path, side, n, limit):
    py = factory(tmp_path / "f", n, side)
    dst = tmp_path / "tiny.lmdb"
    result = run_job(convert(f"{py}:Tiny", dst, workers=1))
    pixel_bytes = n * 3 * side * side
    # format 1 took 1,029 B per 16x16 sample (1.34x) and 4,125 B per 32x32 one (1.34x)
    print(f"{side}x{side}: {result.bytes_on_disk / n:,.0f} B per sample, "
          f"{result.bytes_on_disk / pixel_bytes:.3f}x the pixel bytes")
    assert result.bytes_on_disk <= limit * pixel_bytes, result.bytes_on_disk / pixel_bytes
    ds = LMDBDataset(dst)
    for i in (0, 1, n // 2, n - 1):  # random access into any chunk
        image, label = ds[i]
        assert image.numpy().tobytes() == pixels(i, side).tobytes() and label == i % 1000
    assert ds.chunk > 1
    ds.close()


@pytest.mark.runner  # decoding workers (a process pool)
def test_totensor_floats_land_as_uint8_and_come_back_exactly(tmp_path, capsys):
    py = factory(tmp_path / "f", 300, 16)
    dst = tmp_path / "floats.lmdb"
    assert cli.main(["convert", f"{py}:ToTensorLike", str(dst), "--workers", "1",
                     "--verify", "20"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "0: float32 3x16x16 on exact k/255 steps, stored as uint8 (1/4 of the bytes)" in out
    assert "identical to the source" in out
    # The pages the records take: the file also holds the pages of each earlier commit
    # (copy-on-write), and a commit comes every 2 s, so its size follows the machine's load.
    with lmdb.open(str(dst), readonly=True, lock=False) as env:
        stat = env.stat()
    size = stat["psize"] * (stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"])
    assert size < 1.3 * 300 * 768  # float32 took 4x: 1.34 GB instead of 336 MB in the issue
    ds = LMDBDataset(dst)
    image, label = ds[7]
    assert image.dtype == torch.uint8 and image.numpy().tobytes() == pixels(7, 16).tobytes()
    floats = LMDBDataset(dst, floats=True)
    x, _ = floats[7]
    assert x.dtype == torch.float32
    assert torch.equal(x, torch.from_numpy(pixels(7, 16)).float() / 255)  # bit for bit
    batch_x, _ = floats[[7, 8]]
    assert torch.equal(batch_x[0], x)
    ds.close()
    floats.close()


def test_other_floats_are_kept_with_a_line_saying_what_they_cost(tmp_path, capsys):
    py = factory(tmp_path / "f", 50, 16)
    assert cli.main(["convert", f"{py}:Noise", str(tmp_path / "n.lmdb"), "--workers", "0",
                     "--verify", "5"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    line = [ln for ln in out.splitlines() if "value: float32" in ln]
    assert len(line) == 1 and "stored as float32: its values are not on k/255 steps" in line[0]
    assert "3,072 B per sample, 4x what uint8 would take" in line[0]
    assert cli.main(["convert", f"{py}:Noise", str(tmp_path / "h.lmdb"), "--workers", "0",
                     "--floats", "float16", "--verify", "0"]) == 0  # fmt: skip
    assert "value: float32 3x16x16 stored as float16" in capsys.readouterr().out
    half = LMDBDataset(tmp_path / "h.lmdb")
    want = np.random.default_rng(3).random((3, 16, 16), dtype=np.float32)
    assert half[3].dtype == torch.float16 and np.allclose(half[3].numpy(), want, atol=1e-3)
    assert LMDBDataset(tmp_path / "h.lmdb", floats=True)[3].dtype == torch.float32
    half.close()


def test_a_later_sample_off_the_steps_is_skipped_not_rounded(tmp_path):
    py = factory(tmp_path / "f", 30, 8)
    result = run_job(convert(f"{py}:LaterNotOnSteps", tmp_path / "l.lmdb", workers=0))
    assert [s["source_index"] for s in result.skipped] == [29]
    assert "not on 1/255 steps" in result.skipped[0]["reason"]
    assert "--floats float32" in result.skipped[0]["reason"]
    kept = run_job(convert(f"{py}:LaterNotOnSteps", tmp_path / "k.lmdb", workers=0,
                           preprocess=Preprocess(floats="float32")))  # fmt: skip
    assert kept.count == 30 and not kept.skipped


def write_format1(dst: Path, samples: list[tuple[np.ndarray, int]]) -> None:
    """An LMDB as stallscope format 1 wrote it: one record per key, no chunks, no checksums."""
    env = lmdb.open(str(dst), map_size=1 << 24)
    meta = {
        "format": fmt.FORMAT, "version": 1, "complete": True, "count": len(samples),
        "source": {"kind": "folder", "spec": "/gone", "count": len(samples), "fingerprint": "x"},
        "preprocess": Preprocess().to_dict(), "fields": ["image", "label"], "classes": ["a"],
        "structure": {"type": "tuple", "items": [{"type": "leaf", "kind": "image"},
                                                 {"type": "leaf", "kind": "int"}]},
    }  # fmt: skip
    with env.begin(write=True) as txn:
        txn.put(fmt.META_KEY, fmt.dumps(meta))
        txn.put(fmt.PROGRESS_KEY, fmt.dumps({"next_source": len(samples), "written": len(samples)}))
        for i, (image, label) in enumerate(samples):
            arrays = [image, np.asarray(label, np.int64)]
            header, offsets, size = fmt.plan(i, [("uint8", image.shape), ("int64", ())])
            record = bytearray(size)
            fmt.write(memoryview(record), 0, header, offsets, arrays)
            txn.put(fmt.sample_key(i), bytes(record))
    env.close()


def test_format1_lmdbs_still_read(tmp_path):
    samples = [(pixels(i, 8), i % 3) for i in range(40)]
    dst = tmp_path / "old.lmdb"
    write_format1(dst, samples)
    ds = LMDBDataset(dst)
    assert ds.version == 1 and len(ds) == 40
    for i in (0, 17, 39):
        image, label = ds[i]
        assert image.numpy().tobytes() == samples[i][0].tobytes() and label == samples[i][1]
    images, labels = ds[[3, 5, 7]]
    assert images.shape == (3, 3, 8, 8) and labels.tolist() == [0, 2, 1]
    loader = DataLoader(ds, batch_size=16, shuffle=False)
    assert torch.equal(next(iter(loader))[0][5], torch.from_numpy(samples[5][0]))
    check = run_job(check_records(dst))
    assert not check.damaged and not check.checksums and "no checksums" in check.summary()
    ds.close()


@pytest.fixture(scope="module")
def folder_lmdb(tmp_path_factory):
    base = tmp_path_factory.mktemp("batches")
    noise_classes(base / "src", 3, 70, (12, 10), seed=5)
    dst = base / "b.lmdb"
    run_job(convert(base / "src", dst, workers=0, commit_every=7))
    return base / "src", dst


@pytest.mark.runner  # DataLoader worker processes
def test_batched_reads_equal_sample_by_sample_reads(folder_lmdb):
    _src, dst = folder_lmdb
    ds = LMDBDataset(dst)
    order = np.random.default_rng(0).permutation(len(ds))[:50].tolist()
    one_by_one = [ds[i] for i in order]
    items = ds.__getitems__(order)
    assert [int(label) for _img, label in items] == [label for _img, label in one_by_one]
    assert all(torch.equal(a[0], b[0]) for a, b in zip(items, one_by_one, strict=True))
    images, labels = ds[order]  # the batch_sampler path: one collated batch
    assert images.shape == (50, 3, 12, 10) and images.dtype == torch.uint8
    assert labels.dtype == torch.int64 and labels.tolist() == [lb for _i, lb in one_by_one]
    assert torch.equal(images, torch.stack([img for img, _lb in one_by_one]))
    # a DataLoader with the default collate (calls __getitems__) and the documented
    # batch_sampler path give the same batches in the same order
    plain = DataLoader(ds, batch_size=32, shuffle=False)
    sampler = BatchSampler(SequentialSampler(ds), batch_size=32, drop_last=False)
    batched = DataLoader(ds, sampler=sampler, batch_size=None)
    for (a_img, a_lb), (b_img, b_lb) in zip(plain, batched, strict=True):
        assert torch.equal(a_img, b_img) and torch.equal(a_lb, b_lb)
    workers = DataLoader(ds, sampler=BatchSampler(RandomSampler(ds), 64, False), batch_size=None,
                         num_workers=2)  # fmt: skip
    seen = sorted(int(x) for _img, lb in workers for x in lb)
    assert len(seen) == len(ds)
    ds.close()


def test_verify_reads_rejects_a_damaged_record(folder_lmdb, tmp_path):
    _src, dst = folder_lmdb
    copy = tmp_path / "copy.lmdb"
    copy.mkdir()
    (copy / "data.mdb").write_bytes((dst / "data.mdb").read_bytes())
    from tests.core.test_lmdb_convert import flip_pixel

    flip_pixel(copy, 100)
    plain = LMDBDataset(copy)
    plain[100]  # without the check the damaged pixels come back as they are
    checked = LMDBDataset(copy, verify_reads=True)
    checked[99]
    with pytest.raises(StallscopeError, match="sample 100 is damaged .crc32"):
        checked[100]
    with pytest.raises(StallscopeError, match="sample 100 is damaged .crc32"):
        checked[[98, 99, 100]]
    plain.close()
    checked.close()


def test_a_conversion_stats_each_source_file_once_and_resume_none(tmp_path, monkeypatch):
    root = tmp_path / "src"
    for c in range(4):
        (root / f"k{c}").mkdir(parents=True)
        for i in range(30):
            Image.fromarray(np.full((6, 6, 3), i, np.uint8)).save(root / f"k{c}" / f"{i}.png")
    os.symlink("..", root / "k0" / "loop")
    calls: list[str] = []
    real_stat = os.stat

    def counting(path, *args, **kwargs):
        calls.append(os.fspath(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting)
    cancel = CancelFlag()
    job = convert(root, tmp_path / "o.lmdb", workers=0, commit_every=10, cancel=cancel)
    with pytest.raises(Cancelled):
        for done, total in job:
            if total and done >= 40:
                cancel.set()
    pngs = [p for p in calls if p.endswith(".png")]
    assert len(pngs) == len(set(pngs)) == 120  # the one scan: one stat per file
    calls.clear()
    result = run_job(convert(root, tmp_path / "o.lmdb", workers=0))
    assert result.count == 120 and result.resumed_from > 0
    assert [s["path"] for s in result.scan_skipped] == ["k0/loop"]  # kept from the first run
    assert not [p for p in calls if p.endswith(".png")]  # resumed from the stored listing
    calls.clear()
    check = run_job(verify(tmp_path / "o.lmdb", n=10))
    assert check.ok and check.checked == 10
    assert len([p for p in calls if p.endswith(".png")]) == 10  # only the samples it re-decodes
    env = lmdb.open(str(tmp_path / "o.lmdb"), readonly=True, lock=False)
    with env.begin() as txn:
        assert json.loads(txn.get(fmt.META_KEY))["listing"] == 120
    env.close()


@pytest.mark.runner  # the CLI in a child process, killed mid-run
def test_a_folder_conversion_killed_mid_run_resumes_exactly_from_its_listing(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from stallscope.core.lmdb.destination import destination_state

    root = tmp_path / "src"
    rng = np.random.default_rng(8)
    expected = []
    for c in range(3):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(800):
            arr = rng.integers(0, 256, (5, 4, 3), np.uint8)
            Image.fromarray(arr).save(root / f"c{c}" / f"{i:04d}.png")
            expected.append((arr.transpose(2, 0, 1).tobytes(), c))
    dst = tmp_path / "k.lmdb"
    cmd = [sys.executable, "-m", "stallscope.core.cli", "convert", str(root), str(dst),
           "--workers", "1", "--commit-every", "5", "--verify", "0"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        state = destination_state(dst) if (dst / "data.mdb").exists() else None
        if state is not None and state.kind == "ours" and state.progress["written"] >= 200:
            break
        assert proc.poll() is None and time.monotonic() < deadline, "finished before the kill"
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    state = destination_state(dst)
    assert not state.complete and 200 <= state.progress["written"] < 2400
    for c in range(3):  # a changed folder would be rescanned by a careless resume
        Image.fromarray(np.zeros((5, 4, 3), np.uint8)).save(root / f"c{c}" / "zz_new.png")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "resumed at" in done.stdout, done.stderr
    ds = LMDBDataset(dst)
    assert len(ds) == 2400  # the listing of the first run: the new files are not in it
    got = ds[list(range(2400))]
    assert got[1].tolist() == [c for _b, c in expected]
    assert all(got[0][k].numpy().tobytes() == b for k, (b, _c) in enumerate(expected))
    ds.close()
    assert run_job(check_records(dst)).ok


def test_the_scan_reports_progress_as_it_goes(tmp_path):
    from stallscope.core.lmdb.folder import scan_folder_job

    for c in range(2):
        (tmp_path / f"c{c}").mkdir()
        for i in range(2050):
            (tmp_path / f"c{c}" / f"{i:05d}.png").touch()  # the scan only lists and stats
    job = scan_folder_job(tmp_path)
    seen = []
    try:
        while True:
            seen.append(next(job))
    except StopIteration as stop:
        source = stop.value
    assert seen and all(total == 0 for _done, total in seen)
    assert [done for done, _t in seen] == sorted(done for done, _t in seen)
    assert seen[-1][0] >= 4000 and len(source) == 4100 and source.classes == ["c0", "c1"]
    assert source.sizes.tolist() == [0] * 4100 and len(set(source.mtimes.tolist())) >= 1
