"""Hostile and broken inputs to the LMDB converter, reader and verifier (issue #20): symlink
loops, FIFOs, undecodable names, __getitem__ that ends its process, read-only and full disks,
odd factories, tampered LMDBs and Datasets that are not deterministic. Each ends in bounded
time with one line (exit 2) or a clean result, never a traceback, and keeps what was done."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
from stallscope.core.lmdb.destination import destination_state
from stallscope.core.lmdb.verify import NOT_DETERMINISTIC, verify

pytestmark = pytest.mark.runner  # the CLI runs in a child process


def cli(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stallscope.core.cli", *map(str, args)],
                          capture_output=True, timeout=timeout)  # fmt: skip


def one_line_error(done: subprocess.CompletedProcess) -> str:
    err = done.stderr.decode("utf-8", "replace").strip()
    assert done.returncode == 2, (done.returncode, err)
    assert "Traceback" not in err and err.count("\n") == 0, err
    return err


def images(folder: Path, n: int, start: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + n):
        Image.fromarray(np.full((8, 8, 3), i * 9 % 256, np.uint8)).save(folder / f"{i:02d}.png")


def test_symlink_loops_fifos_and_undecodable_names(tmp_path):
    root = tmp_path / "src"
    images(root / "a", 10)
    os.symlink(".", root / "a" / "self")
    os.symlink("..", root / "a" / "parent")
    (root / "b").mkdir()
    os.symlink(root / "a", root / "b" / "again")  # a second link to a listed folder
    images(root / "b", 2, start=50)
    os.mkfifo(root / "a" / "pipe.jpg")  # opening it would block the decoder forever
    bad = os.fsdecode(b"\xff\xfe name.png")
    images(tmp_path / "tmp", 1)
    os.rename(tmp_path / "tmp" / "00.png", root / "b" / bad)
    done = cli("convert", root, tmp_path / "o.lmdb", "--workers", "2", timeout=60)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "wrote 13 samples" in out  # 10 + 2 + the undecodable name: loops add none
    assert "not listed as samples (4):" in out
    for line in ("a/self: directory already listed as a", "a/parent: directory already listed "
                 "as the source folder", "b/again: directory already listed as a",
                 "a/pipe.jpg: not a regular file (a FIFO)"):  # fmt: skip
        assert line in out
    assert "identical to the source" in out
    ds = LMDBDataset(tmp_path / "o.lmdb")
    assert len(ds) == 13 and ds.classes == ["a", "b"]
    ds.close()
    with lmdb.open(str(tmp_path / "o.lmdb"), readonly=True, lock=False) as env:
        with env.begin() as txn:
            meta = json.loads(txn.get(fmt.META_KEY))
    assert meta["scan_skipped_count"] == 4


DYING = textwrap.dedent(
    """
    import os
    import sys
    import time
    import numpy as np

    HOW = open(__file__.replace(".py", ".how")).read()

    class Dying:
        def __len__(self):
            return 60

        def __getitem__(self, i):
            if i == 6:
                time.sleep(0.5)  # the first task is still decoding when another worker dies
            if i == 37:
                if HOW == "exit":
                    os._exit(3)
                sys.exit(4)
            return np.full((4, 4), i, np.uint8), i

    def make():
        return Dying()
    """
)


@pytest.mark.parametrize("how, workers", [("exit", 2), ("sys.exit", 2), ("sys.exit", 0)])
def test_a_getitem_that_ends_its_process_is_named_and_work_is_kept(tmp_path, how, workers):
    (tmp_path / "dying.py").write_text(DYING)
    (tmp_path / "dying.how").write_text(how)
    dst = tmp_path / "d.lmdb"
    done = cli("convert", f"{tmp_path / 'dying.py'}:make", dst, "--workers", workers,
               "--commit-every", "4", timeout=60)  # fmt: skip
    err = one_line_error(done)
    assert "sample 37" in err and "the samples before it are kept" in err
    assert ("exit status 3" in err) if how == "exit" else ("sys.exit(4)" in err)
    state = destination_state(dst)
    assert 0 < state.progress["written"] <= 37 and not state.complete
    ds = LMDBDataset(dst, allow_partial=True)
    assert [int(ds[k][1]) for k in range(len(ds))] == list(range(len(ds)))
    ds.close()


@pytest.fixture
def tmpfs(tmp_path):
    """A small tmpfs to fill or make read-only (needs root and mount; skipped otherwise)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()

    def mount(size: str, ro: bool = False) -> Path:
        opts = f"size={size}" + (",ro" if ro else "")
        if subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "none", str(mnt)],
                          capture_output=True).returncode != 0:  # fmt: skip
            pytest.skip("cannot mount a tmpfs here")
        return mnt

    yield mount
    subprocess.run(["umount", str(mnt)], capture_output=True)


FILLING = textwrap.dedent(
    """
    import numpy as np

    FILLER = open(__file__.replace(".py", ".filler")).read()

    class Filling:
        def __len__(self):
            return 3000

        def __getitem__(self, i):
            if i == 1500:  # something else fills the disk mid-conversion
                with open(FILLER, "wb") as f:
                    try:
                        f.write(b"x" * (16 << 20))
                    except OSError:
                        pass
            return np.full((3, 16, 16), i % 256, np.uint8), i

    def make():
        return Filling()
    """
)


def test_full_and_read_only_disks_are_one_line(tmp_path, tmpfs):
    root = tmp_path / "src"
    images(root / "a", 10)
    mnt = tmpfs("6m")
    (tmp_path / "fill.py").write_text(FILLING)
    (tmp_path / "fill.filler").write_text(str(mnt / "filler"))
    dst = mnt / "fill.lmdb"
    err = one_line_error(cli("convert", f"{tmp_path / 'fill.py'}:make", dst, "--workers", "1",
                             "--commit-every", "100", timeout=60))  # fmt: skip
    assert f"{dst}: disk full, " in err and " MiB needed, 0.0 MiB free" in err
    written = destination_state(dst).progress["written"]
    assert 0 < written < 3000  # what was committed before the disk filled is kept
    (mnt / "filler").unlink()
    subprocess.run(["rm", "-r", str(dst)], check=True)
    # the up-front check: the estimate does not fit at all
    (mnt / "filler2").write_bytes(b"x" * (3 << 20))
    err = one_line_error(cli("convert", f"{tmp_path / 'fill.py'}:make", mnt / "new.lmdb"))
    assert "disk full, 3.4 MiB needed, " in err and "Traceback" not in err
    assert not (mnt / "new.lmdb").exists()
    subprocess.run(["umount", str(mnt)], check=True)
    ro = tmpfs("16m", ro=True)
    err = one_line_error(cli("convert", root, ro / "x.lmdb"))
    assert "cannot write there" in err and "Read-only file system" in err


FACTORIES = textwrap.dedent(
    """
    import numpy as np

    class Sized:
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return np.zeros(2, np.uint8)

    def negative():
        return Sized(-1)

    def huge():
        return Sized(10**30)

    def too_many():
        return Sized(10**11)

    class Surrogates:
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return {"name": "caf\\udce9" + str(i), "x": np.full(3, i, np.int16)}

    def surrogates():
        return Surrogates()

    class Deep:
        def __len__(self):
            return 3

        def __getitem__(self, i):
            x = np.zeros(1, np.uint8)
            for _ in range(100000):
                x = [x]
            return x

    def deep():
        return Deep()

    class Weird:
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return {1: 2} if i == 0 else np.array([object()])

    def weird():
        return Weird()
    """
)


def test_factory_edge_cases_end_in_one_line_or_round_trip(tmp_path):
    py = tmp_path / "odd.py"
    py.write_text(FACTORIES)
    for name, words in (("negative", "len() of the dataset failed"),
                        ("huge", "len() of the dataset failed"),
                        ("too_many", "at most 9,999,999,999 can be stored"),
                        ("deep", "nested deeper than 32 levels"),
                        ("weird", "the first samples cannot be read")):  # fmt: skip
        err = one_line_error(cli("convert", f"{py}:{name}", tmp_path / f"{name}.lmdb"))
        assert words in err, (name, err)
    done = cli("convert", f"{py}:surrogates", tmp_path / "s.lmdb", "--workers", "1")
    assert done.returncode == 0, done.stderr.decode()
    ds = LMDBDataset(tmp_path / "s.lmdb")
    assert [ds[i]["name"] for i in range(4)] == [f"caf\udce9{i}" for i in range(4)]
    assert ds[[0, 1]]["name"] == ["caf\udce90", "caf\udce91"]
    ds.close()


def small_lmdb(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    images(root / "a", 30)
    dst = tmp_path / "ok.lmdb"
    run_job(convert(root, dst, workers=0))
    return dst


def rewrite(dst: Path, key: bytes, value: bytes) -> None:
    env = lmdb.open(str(dst))
    with env.begin(write=True) as txn:
        txn.put(key, value)
    env.close()


@pytest.mark.parametrize("meta_change, words", [
    (lambda m: m.update(structure="DEEP"), "an LMDB that stallscope did not write"),
    (lambda m: m.update(count="many"), "count is not a sample count"),
    (lambda m: m.update(chunk=0), "chunk 0"),
    (lambda m: m["structure"]["items"][0].update(kind="pickle"), "leaf kind 'pickle'"),
    (lambda m: m.update(version=99), "format 99 is not known"),
    (lambda m: m.update(structure={"type": "dict", "items": [], "keys": 5}), "dict keys"),
])  # fmt: skip
def test_hostile_metadata_is_one_clear_error(tmp_path, meta_change, words):
    dst = small_lmdb(tmp_path)
    env = lmdb.open(str(dst))
    with env.begin() as txn:
        meta = json.loads(txn.get(fmt.META_KEY))
    env.close()
    meta_change(meta)
    text = json.dumps(meta).replace('"DEEP"', "[" * 100_000 + "]" * 100_000)  # RecursionError
    rewrite(dst, fmt.META_KEY, text.encode())
    with pytest.raises(StallscopeError, match=words):
        LMDBDataset(dst)
    assert words in one_line_error(cli("verify", dst))


def test_damaged_records_are_listed_never_a_traceback(tmp_path):
    dst = small_lmdb(tmp_path)
    env = lmdb.open(str(dst))
    with env.begin() as txn:
        chunk = bytearray(txn.get(fmt.sample_key(0)))
    env.close()
    n = fmt.chunk_count(bytes(chunk))
    assert n == 30
    # a record header made absurd (its crc32 updated too: the format check must catch it)
    start, end, _crc = fmt.chunk_span(bytes(chunk), 4)
    chunk[start + 12] = 200  # field 0's dtype code
    import zlib

    crc_at = 16 + 4 * (n + 4)
    chunk[crc_at : crc_at + 4] = zlib.crc32(bytes(chunk[start:end])).to_bytes(4, "little")
    # a record end offset that points outside the chunk
    chunk[16 + 4 * 9 : 16 + 4 * 10] = (10**8).to_bytes(4, "little")
    rewrite(dst, fmt.sample_key(0), bytes(chunk))
    ds = LMDBDataset(dst)
    with pytest.raises(StallscopeError, match="sample 4 is damaged"):
        ds[4]
    with pytest.raises(StallscopeError, match="sample 9 is damaged"):
        ds[9]
    with pytest.raises(StallscopeError, match="damaged"):
        ds[[1, 2, 9]]
    ds.close()
    done = cli("verify", dst, "--samples", "0")
    out = done.stdout.decode()
    assert done.returncode == 1 and "Traceback" not in done.stderr.decode()
    assert "sample 4: record header is damaged" in out and "sample 9" in out
    rewrite(dst, fmt.sample_key(0), b"SSC2 not really a chunk")
    out = cli("verify", dst, "--samples", "0").stdout.decode()
    assert "samples 0..29: chunk 0: chunk of 23 bytes cannot hold" in out


RANDOM = textwrap.dedent(
    """
    import numpy as np

    class Augmented:
        def __len__(self):
            return 20

        def __getitem__(self, i):
            return np.random.default_rng().integers(0, 256, (3, 4, 4), dtype=np.uint8)

    def make():
        return Augmented()
    """
)


def test_verify_says_when_the_dataset_is_not_deterministic(tmp_path):
    (tmp_path / "aug.py").write_text(RANDOM)
    dst = tmp_path / "aug.lmdb"
    run_job(convert(f"{tmp_path / 'aug.py'}:make", dst, workers=0))
    result = run_job(verify(dst, n=20))
    assert not result.ok and result.problem.startswith(NOT_DETERMINISTIC)
    assert not result.damaged and result.records_checked == 20  # the LMDB itself is fine
