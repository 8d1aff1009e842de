"""What the wizard and the CLI suggest around a conversion (core/lmdb/snippet.py) and the
destination and free-space verdicts (core/lmdb/destination.py), without Qt."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stallscope.core import cli, units
from stallscope.core.jobs import run_job
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.destination import check_destination, check_space
from stallscope.core.lmdb.images import Preprocess
from stallscope.core.lmdb.inspection import inspect_source
from stallscope.core.lmdb.measure import measure
from stallscope.core.lmdb.snippet import code_snippet, default_destination, factory_candidates

FACTORIES = textwrap.dedent('''
    import numpy as np

    class Points:
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"xy": np.full(2, i, np.float32), "id": i}

    def helper(path):
        return path

    def _private():
        return Points()

    def make_points(n=5):
        return Points()

    def dataset_b():
        return Points()
''')


def make_folder(root: Path, classes=("cat", "dog"), n=3) -> Path:
    rng = np.random.default_rng(1)
    for cls in classes:
        folder = root / cls if cls else root
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 256, (20, 24, 3), np.uint8)).save(folder / f"{i}.png")
    return root


def test_factory_candidates_lists_callables_without_arguments_likely_ones_first(tmp_path):
    path = tmp_path / "ds.py"
    path.write_text(FACTORIES)
    assert factory_candidates(str(path)) == ["make_points", "dataset_b", "Points"]
    (tmp_path / "bad.py").write_text("def broken(:\n")
    assert factory_candidates(str(tmp_path / "bad.py")) == []
    assert factory_candidates(str(tmp_path / "missing.py")) == []


def test_default_destination_sits_beside_the_source(tmp_path):
    folder = make_folder(tmp_path / "train")
    assert default_destination(inspect_source(str(folder), n_preview=1)) == str(
        tmp_path / "train.lmdb")
    (tmp_path / "ds.py").write_text(FACTORIES)
    info = inspect_source(f"{tmp_path / 'ds.py'}:make_points", n_preview=1)
    assert default_destination(info) == str(tmp_path / "ds_make_points.lmdb")


def test_code_snippet_runs_against_the_converted_lmdb(tmp_path):
    folder = make_folder(tmp_path / "train")
    info = inspect_source(str(folder), n_preview=1)
    dst = tmp_path / "train.lmdb"
    run_job(convert(str(folder), str(dst), workers=0))
    code = code_snippet(str(dst), info)
    assert "for images, labels in loader:" in code and f"LMDBDataset({str(dst)!r})" in code
    setup = code.split("\nloader =")[0]  # imports + dataset: run them for real
    scope: dict = {}
    exec(compile(setup, "<snippet>", "exec"), scope)
    assert len(scope["dataset"]) == 6 and tuple(scope["dataset"][0][0].shape) == (3, 20, 24)
    scope["dataset"].close()
    compile(code, "<snippet>", "exec")  # the whole snippet is valid Python

    flat = inspect_source(str(make_folder(tmp_path / "flat", classes=("",))), n_preview=1)
    assert "for images in loader:" in code_snippet("x.lmdb", flat)
    (tmp_path / "ds.py").write_text(FACTORIES)
    factory = inspect_source(f"{tmp_path / 'ds.py'}:make_points", n_preview=1)
    assert "same structure as your dataset: {xy: ndarray, id: int}" in code_snippet("x", factory)


def test_destination_verdicts(tmp_path):
    folder = make_folder(tmp_path / "train")
    spec = str(folder.resolve())
    pre = Preprocess(resize=16)
    new = check_destination(tmp_path / "new.lmdb", spec, pre)
    assert new.ok and new.tone == "info" and "new LMDB" in new.text
    (tmp_path / "file").write_text("x")
    foreign = check_destination(tmp_path / "file", spec, pre)
    assert not foreign.ok and foreign.tone == "bad" and "is a file" in foreign.text

    dst = tmp_path / "train.lmdb"
    result = run_job(convert(spec, str(dst), workers=0, preprocess=pre))
    assert result.count == 6
    done = check_destination(dst, spec, pre)
    assert done.ok and done.tone == "ok" and "Already converted (6 samples)" in done.text
    other = check_destination(dst, spec, Preprocess(resize=32))
    assert not other.ok and "resize shorter side to 16" in other.text
    elsewhere = check_destination(dst, str(tmp_path / "other"), pre)
    assert not elsewhere.ok and spec in elsewhere.text
    ds = LMDBDataset(dst)
    assert len(ds) == 6
    ds.close()


def test_space_verdicts_name_the_disk_and_the_sizes(tmp_path):
    import shutil

    free = shutil.disk_usage(tmp_path).free
    target = tmp_path / "not" / "yet" / "there.lmdb"
    info = check_space(target, None)
    assert info.ok and info.text == f"{units.size(free)} free on {tmp_path}"
    assert check_space(target, 1000).tone == "ok"
    full = check_space(target, int(free * 2))
    assert not full.ok and full.tone == "bad"
    assert f"needs about {units.size(int(free * 2))}" in full.text
    assert units.size(512) == "512 B" and units.size(12_595) == "12.3 KiB"
    assert units.size(3 * 2**30) == "3.00 GiB" and units.clock(125) == "2:05"


@pytest.mark.parametrize("as_json", [True, False])
def test_cli_convert_prints_the_reader_snippet(tmp_path, capsys, as_json):
    folder = make_folder(tmp_path / "train")
    dst = tmp_path / "out.lmdb"
    args = ["convert", str(folder), str(dst), "--workers", "0", "--verify", "0", "--snippet"]
    assert cli.main(args + (["--json"] if as_json else [])) == 0
    out = capsys.readouterr().out
    if as_json:
        snippet = json.loads(out)["snippet"]
    else:
        assert "wrote 6 samples to" in out and "use it in your training script:" in out
        snippet = out.split("use it in your training script:\n\n")[1]
    assert f"dataset = LMDBDataset({str(dst)!r})" in snippet
    assert "for images, labels in loader:" in snippet


def test_varied_sizes_are_surveyed_warned_about_and_the_snippet_still_runs(tmp_path, capsys):
    rng = np.random.default_rng(4)
    root = tmp_path / "varied"
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        for i in range(6):
            h, w = (20, 30) if i % 3 else (16, 12)
            Image.fromarray(rng.integers(0, 256, (h, w, 3), np.uint8)).save(root / cls / f"{i}.png")
    info = inspect_source(str(root), n_preview=1)
    assert info.varied and info.shapes == [("3x20x30", 8), ("3x16x12", 4)]
    assert info.suggestion == "--resize 20 --crop 20"
    assert "warning: image has 2 sizes in 12 sampled" in info.shape_line()
    dst = tmp_path / "v.lmdb"
    assert cli.main(["convert", str(root), str(dst), "--workers", "0", "--verify", "0",
                     "--snippet"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    # every image was decoded: the exact count, and a file of the odd size
    assert "warning: image has 2 sizes in 12 samples (3x20x30: 8; 3x16x12: 4 (a/0.png))" in out
    assert "convert with --resize 20 --crop 20, or read with collate_fn=list" in out
    snippet = out.split("use it in your training script:\n\n")[1]
    assert "collate_fn=list" in snippet and "for batch in loader:" in snippet
    scope: dict = {}  # as pasted: the snippet defines device and pins only with CUDA
    exec(compile(snippet, "<snippet>", "exec"), scope)  # no "stack expects equal size"
    batch = next(iter(scope["loader"]))
    assert isinstance(batch, list) and len(batch) == min(12, scope["loader"].batch_size)
    # the speed check reads as the snippet does, and says so (the wizard prints t.collate)
    timed = run_job(measure(dst, num_workers=0, batch_size=4, seconds=0.05, cold=False))
    assert timed.collate == "collate_fn=list" and timed.after.samples > 0
    # resized and cropped as suggested: one shape, a stacked batch, the plain snippet
    assert cli.main(["convert", str(root), str(tmp_path / "s.lmdb"), "--workers", "0",
                     "--resize", "20", "--crop", "20", "--verify", "0", "--snippet"]) == 0
    out = capsys.readouterr().out
    assert "image: 3x20x20 in all 12 samples" in out and "collate_fn" not in out
    snippet = out.split("use it in your training script:\n\n")[1]
    scope = {}
    exec(compile(snippet, "<s>", "exec"), scope)
    assert scope["images"].dtype.is_floating_point and scope["images"].shape[1:] == (3, 20, 20)
    timed = run_job(measure(tmp_path / "s.lmdb", num_workers=0, batch_size=4, seconds=0.05,
                            cold=False))
    assert timed.collate == "default collate"


def test_speed_is_worded_by_its_direction():
    from stallscope.core.lmdb.measure import Rate, Throughput, speed_words

    assert speed_words(15.8) == "15.8x faster" and speed_words(0.4) == "2.5x slower"
    assert speed_words(1.01) == "about the same speed"
    slow = Throughput(Rate("a", 100, 1.0, 0), Rate("b", 40, 1.0, 0), 0, 32)
    assert slow.verdict() == "2.5x slower"
