"""LMDB conversion on real image files: round trip, preprocessing, skips, map growth, refusals,
cancel + resume, and resume after the converter process is killed with SIGKILL."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import lmdb
import numpy as np
import psutil
import pytest
from PIL import Image

from stallscope.core import cli
from stallscope.core.errors import Cancelled, StallscopeError
from stallscope.core.jobs import CancelFlag, run_job
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.destination import destination_state
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.inspection import inspect_source
from stallscope.core.lmdb.verify import verify

pytestmark = pytest.mark.runner  # the CLI and decoding workers in child processes

EXTS = (".png", ".jpg", ".jpeg")


def write_tree(root: Path, seed: int = 0) -> dict:
    """ImageFolder tree: 3 classes, nested subfolders, PNG/JPEG of several sizes and modes,
    two corrupt files and a text file. Returns {"valid": [(rel, label)], "corrupt": [rel]}."""
    rng = np.random.default_rng(seed)
    valid, corrupt = [], []
    layout = {
        "ant": ["a0.png", "a1.jpg", "deep/a2.png", "deep/er/a3.jpeg", "a4.png"],
        "bee": ["b0.jpg", "b1.png", "b2.png", "b3.jpg", "z/b4.png"],
        "cat": ["c0.png", "c1.png", "c2.jpg", "c3.png", "c4.png", "c5.jpg"],
    }
    modes = ["RGB", "L", "RGBA", "P", "RGB"]
    for label, (cls, names) in enumerate(sorted(layout.items())):
        for j, name in enumerate(names):
            path = root / cls / name
            path.parent.mkdir(parents=True, exist_ok=True)
            h, w = 9 + 7 * j + label, 13 + 5 * ((j * 3) % 4)
            arr = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            img = Image.fromarray(arr)
            mode = modes[j % len(modes)]
            if name.endswith((".jpg", ".jpeg")):
                mode = "L" if mode == "L" else "RGB"
            img = img.convert(mode) if mode != "P" else img.quantize(16)
            img.save(path, quality=90) if name.endswith((".jpg", ".jpeg")) else img.save(path)
            valid.append((f"{cls}/{name}", label))
    (root / "ant" / "broken.jpg").write_bytes(b"this is not an image at all")
    good = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)).save(good, "PNG")
    (root / "cat" / "truncated.png").write_bytes(good.getvalue()[:200])
    corrupt += ["ant/broken.jpg", "cat/truncated.png"]
    (root / "bee" / "notes.txt").write_text("not an image")
    return {"valid": valid, "corrupt": corrupt}


def image_folder_order(root: Path) -> list[tuple[str, int]]:
    """torchvision.datasets.ImageFolder's order, computed independently of stallscope."""
    out = []
    classes = sorted(d.name for d in root.iterdir() if d.is_dir())
    for label, cls in enumerate(classes):
        for dirpath, dirnames, files in sorted(os.walk(root / cls)):
            dirnames.sort()
            for f in sorted(files):
                if f.lower().endswith(EXTS):
                    rel = os.path.relpath(os.path.join(dirpath, f), root)
                    out.append((rel, label))
    return out


def reference(path: Path, pre: Preprocess | None = None) -> np.ndarray:
    """Independent decode: PIL -> RGB -> resize/crop -> numpy CHW."""
    pre = pre or Preprocess()
    img = Image.open(path).convert("RGB")
    if isinstance(pre.resize, int):
        w, h = img.size
        r = pre.resize
        size = (r, int(r * h / w)) if w <= h else (int(r * w / h), r)
        img = img.resize(size, Image.BILINEAR)
    if pre.crop:
        w, h = img.size
        left, top = round((w - pre.crop[0]) / 2), round((h - pre.crop[1]) / 2)
        img = img.crop((left, top, left + pre.crop[0], top + pre.crop[1]))
    return np.asarray(img).transpose(2, 0, 1)


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "src"
    info = write_tree(root)
    return root, info


def check_against_source(dst: Path, root: Path, info: dict, pre: Preprocess | None = None):
    order = image_folder_order(root)
    bad = info["corrupt"]
    expected = [(i, rel, label) for i, (rel, label) in enumerate(order) if rel not in bad]
    ds = LMDBDataset(dst)
    try:
        assert len(ds) == len(expected) == len(info["valid"])
        for k, (src_index, rel, label) in enumerate(expected):
            assert ds.source_index(k) == src_index
            image, got_label = ds[k]
            assert got_label == label, rel
            assert image.dtype.is_floating_point is False and image.shape[0] == 3
            assert image.numpy().tobytes() == reference(root / rel, pre).tobytes(), rel
            assert tuple(image.shape) == reference(root / rel, pre).shape
    finally:
        ds.close()


def test_folder_round_trip_is_byte_equal_and_lists_corrupt_files(tree, tmp_path):
    root, info = tree
    dst = tmp_path / "out.lmdb"
    result = run_job(convert(root, dst, workers=2, commit_every=4))
    assert (result.count, result.total) == (len(info["valid"]), len(info["valid"]) + 2)
    check_against_source(dst, root, info)
    reasons = {s["path"]: s["reason"] for s in result.skipped}
    assert set(reasons) == set(info["corrupt"])
    assert "UnidentifiedImageError" in reasons["ant/broken.jpg"]
    assert "truncated" in reasons["cat/truncated.png"].lower()
    env = lmdb.open(str(dst), readonly=True, lock=False)
    with env.begin() as txn:
        meta = json.loads(txn.get(fmt.META_KEY))
        report = json.loads(txn.get(fmt.REPORT_KEY))
        keys = [k for k, _ in txn.cursor() if not k.startswith(b"!")]
    env.close()
    assert meta["classes"] == ["ant", "bee", "cat"] and meta["complete"] is True
    assert {s["path"] for s in report["skipped"]} == set(info["corrupt"])
    # format 2: one chunk of meta["chunk"] consecutive samples per key, zero-padded, dense
    n_chunks = -(-result.count // meta["chunk"])
    assert meta["version"] == 2 and keys == [b"%010d" % c for c in range(n_chunks)]
    assert _no_pickle(dst)


def _no_pickle(dst: Path) -> bool:
    """Every value is a stallscope record or JSON: none starts with a pickle protocol header."""
    env = lmdb.open(str(dst), readonly=True, lock=False)
    with env.begin() as txn:
        heads = {bytes(v[:2]) for _k, v in txn.cursor()}
    env.close()
    return not any(h.startswith(b"\x80") for h in heads)


def test_preprocess_resize_and_centre_crop_match_an_independent_decode(tree, tmp_path):
    root, info = tree
    pre = Preprocess(resize=12, crop=(10, 8), rgb=True)
    dst = tmp_path / "pre.lmdb"
    run_job(convert(root, dst, workers=1, preprocess=pre))
    check_against_source(dst, root, info, pre)


def test_keep_mode_stores_each_image_in_its_own_channels(tree, tmp_path):
    root, _info = tree
    dst = tmp_path / "modes.lmdb"
    run_job(convert(root, dst, workers=0, preprocess=Preprocess(rgb=False)))
    ds = LMDBDataset(dst)
    channels = {ds.source_index(k): ds[k][0].shape[0] for k in range(len(ds))}
    ds.close()
    order = image_folder_order(root)
    for i, (rel, _label) in enumerate(order):
        if i not in channels:
            continue
        mode = Image.open(root / rel).mode
        want = {"L": 1, "RGB": 3, "RGBA": 4, "P": 3}[mode]
        assert channels[i] == want, (rel, mode)
    assert set(channels.values()) == {1, 3, 4}


def test_flat_folder_returns_images_without_labels(tmp_path):
    root = tmp_path / "flat"
    root.mkdir()
    for i in range(5):
        Image.fromarray(np.full((6 + i, 7, 3), 40 * i, np.uint8)).save(root / f"{i}.png")
    run_job(convert(root, tmp_path / "flat.lmdb", workers=0))
    ds = LMDBDataset(tmp_path / "flat.lmdb")
    assert len(ds) == 5 and ds.fields == ["image"] and ds.classes == []
    assert ds[4].shape == (3, 10, 7) and int(ds[4][0, 0, 0]) == 160
    ds.close()


def test_tiny_initial_map_size_grows_and_finishes(tree, tmp_path):
    root, info = tree
    dst = tmp_path / "tiny.lmdb"
    result = run_job(convert(root, dst, workers=2, map_size=32 * 1024, commit_every=3))
    assert result.map_growths >= 1
    assert result.count == len(info["valid"])
    check_against_source(dst, root, info)


def test_cancel_keeps_committed_work_and_resume_completes_exactly(tree, tmp_path):
    root, info = tree
    dst = tmp_path / "cancel.lmdb"
    cancel = CancelFlag()
    job = convert(root, dst, workers=0, chunk=2, commit_every=1000, cancel=cancel)
    done, total = next(job)
    next(job)
    cancel.set()
    with pytest.raises(Cancelled):
        while True:
            done, total = next(job)
    state = destination_state(dst)
    assert state.kind == "ours" and not state.complete
    assert 0 < state.progress["next_source"] < total  # the pending batch was committed on cancel
    with pytest.raises(StallscopeError, match="unfinished conversion"):
        LMDBDataset(dst)
    result = run_job(convert(root, dst, workers=2))
    assert result.resumed_from == state.progress["next_source"]
    check_against_source(dst, root, info)
    assert len(result.skipped) == 2


def test_destinations_that_are_not_ours_are_refused(tree, tmp_path):
    root, _info = tree
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "thesis.tex").write_text("precious")
    with pytest.raises(StallscopeError, match="not empty"):
        run_job(convert(root, busy))
    assert (busy / "thesis.tex").read_text() == "precious"

    foreign = tmp_path / "foreign.lmdb"
    env = lmdb.open(str(foreign))
    with env.begin(write=True) as txn:
        txn.put(b"key", b"someone else's data")
    env.close()
    with pytest.raises(StallscopeError, match="did not write"):
        run_job(convert(root, foreign))

    afile = tmp_path / "file.lmdb"
    afile.write_text("x")
    with pytest.raises(StallscopeError, match="is a file"):
        run_job(convert(root, afile))

    ours = tmp_path / "ours.lmdb"
    run_job(convert(root, ours, workers=0))
    other = tmp_path / "other"
    write_tree(other, seed=1)
    with pytest.raises(StallscopeError, match="holds a conversion of .*src, not of .*other"):
        run_job(convert(other, ours))
    with pytest.raises(StallscopeError, match="other options"):
        run_job(convert(root, ours, preprocess=Preprocess(resize=8)))
    again = run_job(convert(root, ours))
    assert again.already_complete and again.converted_now == 0


def test_cli_convert_reports_json_and_one_line_errors(tree, tmp_path, capsys):
    root, info = tree
    dst = tmp_path / "cli.lmdb"
    assert cli.main(["convert", str(root), str(dst), "--workers", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["count"] == len(info["valid"]) and out["verify"]["ok"] is True
    assert out["verify"]["checked"] == len(info["valid"])
    assert sorted(s["path"] for s in out["skipped"]) == sorted(info["corrupt"])
    seed = out["verify"]["seed"]
    assert cli.main(["verify", str(dst), "--seed", str(seed), "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)  # the same verification, written the same way
    assert alone == out["verify"] and alone["records_checked"] == len(info["valid"])
    assert cli.main(["convert", str(tmp_path / "nope"), str(tmp_path / "x.lmdb")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nope: no such folder" in err


def test_verify_catches_a_tampered_record(tree, tmp_path):
    root, _info = tree
    dst = tmp_path / "tamper.lmdb"
    run_job(convert(root, dst, workers=0))
    assert run_job(verify(dst, n=100)).ok
    flip_pixel(dst, 5)
    result = run_job(verify(dst, n=100))
    assert not result.ok and len(result.mismatches) == 1 and "sample 5" in result.mismatches[0]
    assert result.damaged == ["sample 5: crc32 mismatch (bytes changed)"]


def flip_pixel(dst: Path, sample: int) -> None:
    """Flip one pixel byte of a stored sample in place (its chunk's crc32 left as it was)."""
    env = lmdb.open(str(dst))
    with env.begin(write=True) as txn:
        chunk_n = json.loads(txn.get(fmt.META_KEY))["chunk"]
        key = fmt.sample_key(sample // chunk_n)
        raw = bytearray(txn.get(key))
        start, end, _crc = fmt.chunk_span(bytes(raw), sample % chunk_n)
        _, views = fmt.parse(bytes(raw[start:end]))
        raw[start + views[0].offset + 3] ^= 0xFF  # one pixel byte
        txn.put(key, bytes(raw))
    env.close()


def test_inspect_source_counts_classes_previews_and_estimates_size(tree, tmp_path):
    root, info = tree
    pre = Preprocess(resize=16, crop=(16, 16))
    si = inspect_source(root, pre, n_preview=4)
    assert si.count == len(info["valid"]) + 2 and si.classes == ["ant", "bee", "cat"]
    assert si.fields == ["image", "label"] and len(si.preview) == 4
    assert all(p.shape == (16, 16, 3) and p.dtype == np.uint8 for _c, p in si.preview)
    dst = tmp_path / "est.lmdb"
    run_job(convert(root, dst, preprocess=pre, workers=0))
    actual = os.path.getsize(dst / "data.mdb")
    assert 0.3 * actual < si.estimated_bytes < 3 * actual


# ----------------------------------------------------------------------------- factories

FACTORY = textwrap.dedent(
    """
    import time
    from pathlib import Path

    import numpy as np
    from PIL import Image

    ROOT = Path(__file__).parent / "imgs"
    DELAY = float((Path(__file__).parent / "delay.txt").read_text())

    class Pairs:
        classes = ["even", "odd"]

        def __init__(self):
            self.files = sorted(ROOT.glob("*.png"))

        def __len__(self):
            return len(self.files)

        def __getitem__(self, i):
            time.sleep(DELAY)
            hr = Image.open(self.files[i])
            hr.load()
            return {
                "lr": hr.resize((4, 3)),
                "hr": hr,
                "depth": np.full((3, 5), i / 7, np.float32),
                "label": i % 2,
                "name": self.files[i].stem,
            }

    def make():
        return Pairs()
    """
)


def write_factory(folder: Path, n: int, delay: float) -> tuple[str, list[Path]]:
    imgs = folder / "imgs"
    imgs.mkdir(parents=True)
    rng = np.random.default_rng(3)
    files = []
    for i in range(n):
        path = imgs / f"{i:03d}.png"
        Image.fromarray(rng.integers(0, 256, (10 + i % 5, 12, 3), dtype=np.uint8)).save(path)
        files.append(path)
    files[7].write_bytes(b"corrupt")
    (folder / "delay.txt").write_text(str(delay))
    (folder / "pairs.py").write_text(FACTORY)
    return f"{folder / 'pairs.py'}:make", files


def check_factory_lmdb(dst: Path, files: list[Path]) -> None:
    ds = LMDBDataset(dst)
    try:
        valid = [i for i in range(len(files)) if i != 7]
        assert len(ds) == len(valid)
        seen = [ds.source_index(k) for k in range(len(ds))]
        assert seen == valid  # exactly once each, in order: nothing duplicated, nothing missing
        for k, i in enumerate(valid):
            s = ds[k]
            assert set(s) == {"lr", "hr", "depth", "label", "name"}
            hr = Image.open(files[i]).convert("RGB")
            assert s["hr"].numpy().tobytes() == np.asarray(hr).transpose(2, 0, 1).tobytes()
            lr = np.asarray(hr.resize((4, 3))).transpose(2, 0, 1)
            assert s["lr"].numpy().tobytes() == lr.tobytes()
            assert s["depth"].dtype == np.float32 and np.all(s["depth"] == np.float32(i / 7))
            assert s["label"] == i % 2 and s["name"] == f"{i:03d}"
    finally:
        ds.close()


def test_factory_dataset_dicts_round_trip(tmp_path):
    spec, files = write_factory(tmp_path / "fac", 16, 0.0)
    dst = tmp_path / "fac.lmdb"
    result = run_job(convert(spec, dst, workers=2, commit_every=5))
    assert [s["source_index"] for s in result.skipped] == [7]
    check_factory_lmdb(dst, files)
    assert LMDBDataset(dst).classes == ["even", "odd"]
    assert run_job(verify(dst, n=20)).ok


def _progress(dst: Path) -> dict:
    try:
        env = lmdb.open(str(dst), readonly=True)
    except lmdb.Error:
        return {}
    try:
        with env.begin() as txn:
            raw = txn.get(fmt.PROGRESS_KEY)
    finally:
        env.close()
    return json.loads(raw) if raw else {}


def test_sigkill_mid_conversion_then_resume_gives_exactly_n_samples(tmp_path):
    n = 48
    spec, files = write_factory(tmp_path / "slow", n, 0.03)
    dst = tmp_path / "killed.lmdb"
    cmd = [sys.executable, "-m", "stallscope.core.cli", "convert", spec, str(dst),
           "--workers", "2", "--commit-every", "3", "--verify", "0"]  # fmt: skip
    written_at_kill, killed = [], []
    for _attempt in range(2):
        before = _progress(dst).get("written", 0)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while _progress(dst).get("written", 0) < before + 6:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no progress committed"
            time.sleep(0.01)
        workers = psutil.Process(proc.pid).children(recursive=True)
        # while it runs (after the kill a resource tracker may already have removed them)
        assert list(Path("/dev/shm").glob(f"stallscope-lmdb-{proc.pid}-*")), "no slots used?"
        killed.append(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
        _gone, alive = psutil.wait_procs(workers, timeout=5)
        assert not alive, "decoding workers outlived the killed converter"
        state = destination_state(dst)
        assert not state.complete and 0 < state.progress["next_source"] < n
        written_at_kill.append(state.progress["written"])
    assert written_at_kill[1] > written_at_kill[0]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "resumed at" in done.stdout
    check_factory_lmdb(dst, files)
    leftovers = [p for pid in killed for p in Path("/dev/shm").glob(f"stallscope-lmdb-{pid}-*")]
    assert not leftovers, "shared-memory slots of the killed converters were not cleaned up"
