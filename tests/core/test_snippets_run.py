"""Every snippet `stallscope-cli convert --snippet` and the LMDB wizard print runs as pasted:
in a fresh interpreter, on CPU (no CUDA visible), with warnings as errors, over the LMDB it was
printed for (class folder, flat folder, sizes that vary, a factory of dicts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stallscope.core import cli
from stallscope.core.lmdb.snippet import lmdb_snippet

pytestmark = pytest.mark.runner  # the snippets run in a child interpreter

FACTORY = textwrap.dedent('''
    import numpy as np

    class Scaled:
        """ToTensor-like k/255 floats (stored as uint8) beside a label."""
        def __len__(self):
            return 10

        def __getitem__(self, i):
            img = (np.arange(3 * 8 * 6, dtype=np.float32).reshape(3, 8, 6) + i) % 256 / 255
            return {"img": img, "label": i % 3}

    def make():
        return Scaled()
''')

# runs each snippet file as a script (runpy: as `python snippet.py` would), then reports what
# its loop left behind; -W error makes any warning (pin_memory without CUDA, ...) an exception
RUNNER = textwrap.dedent('''
    import json, runpy, sys
    out = {}
    for path in sys.argv[1:]:
        scope = runpy.run_path(path, run_name="__main__")
        last = next(scope[k] for k in ("images", "batch", "sample") if k in scope)
        out[path] = {"loop": type(last).__name__, "n": len(scope["dataset"]),
                     "device": str(scope["device"])}
    print(json.dumps(out))
''')


def images(root: Path, sizes, classes=("cat", "dog"), n=4) -> str:
    rng = np.random.default_rng(2)
    for cls in classes:
        folder = root / cls if cls else root
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            h, w = sizes[i % len(sizes)]
            Image.fromarray(rng.integers(0, 256, (h, w, 3), np.uint8)).save(folder / f"{i}.png")
    return str(root)


def printed_snippet(src: str, dst: Path, capsys) -> str:
    assert cli.main(["convert", src, str(dst), "--workers", "0", "--verify", "0",
                     "--snippet"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    return out.split("use it in your training script:\n\n")[1].removesuffix("\n")


def test_every_printed_snippet_runs_as_pasted_on_cpu_without_warnings(tmp_path, capsys):
    (tmp_path / "scaled.py").write_text(FACTORY)
    sources = {
        "classes": (images(tmp_path / "classes", [(12, 16)]), "Tensor", 8),
        "flat": (images(tmp_path / "flat", [(12, 16)], classes=("",)), "Tensor", 4),
        "varied": (images(tmp_path / "varied", [(12, 16), (10, 8)]), "list", 8),
        "factory": (f"{tmp_path / 'scaled.py'}:make", "dict", 10),
    }
    files = {}
    for name, (src, _, _) in sources.items():
        dst = tmp_path / f"{name}.lmdb"
        snippet = printed_snippet(src, dst, capsys)
        assert lmdb_snippet(str(dst)) == snippet  # the wizard's result page prints the same
        assert "device" in snippet.split("\nloader =")[0]  # defined before it is used
        files[name] = tmp_path / f"snippet_{name}.py"
        files[name].write_text(snippet + "\n")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONWARNINGS": "error"}
    proc = subprocess.run([sys.executable, "-W", "error", "-c", RUNNER,
                           *map(str, files.values())],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == ""
    ran = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, (_, loop, n) in sources.items():
        assert ran[str(files[name])] == {"loop": loop, "n": n, "device": "cpu"}, name
