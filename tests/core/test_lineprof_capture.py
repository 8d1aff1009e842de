"""Capture side of the line heatmap, driven like the runner drives it, on real DataLoaders.

Each test runs a small script in a fresh interpreter: it loads
core/capture/lineprof_capture.py by path
(as the runner does), calls start / on_dataloader (from a patched DataLoader.__iter__) / finish,
iterates a real DataLoader over a Dataset written here, and reports how many samples it fetched.
The JSON files it leaves in lineprof/ are then read back with core.lineprof.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from scripts import NORM_DATASET

from stallscope.core import lineprof

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess), DataLoader workers

CAPTURE = Path(__file__).resolve().parents[2] / "core" / "capture" / "lineprof_capture.py"
PNGS = 200  # the png scenario's samples (DRIVER's literal)

DATASETS = textwrap.dedent('''
    import os
    import signal
    import time

    import numpy as np
    import torch
    from PIL import Image
    from torch.utils.data import Dataset

    Image.init()  # load PIL's format plugins now, not inside the first __getitem__


    def make_pngs(folder, n, size=192):
        os.makedirs(folder, exist_ok=True)
        rng = np.random.default_rng(0)
        paths = []
        for i in range(n):
            p = os.path.join(folder, f"img{i:03d}.png")
            if not os.path.exists(p):
                arr = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
                Image.fromarray(arr).save(p)
            paths.append(p)
        return paths


    class PngDataset(Dataset):
        def __init__(self, paths):
            self.paths = paths

        def __len__(self):
            return len(self.paths)

        def __getitem__(self, i):
            img = Image.open(self.paths[i])
            img.load()
            arr = np.asarray(img)
            return torch.from_numpy(arr.copy()).permute(2, 0, 1)


''') + NORM_DATASET + textwrap.dedent('''

    def scale(v):
        w = v * 2
        return w + 1


    class Helpers(Dataset):
        def __len__(self):
            return 10

        def offset(self, i):
            return i + 3

        def __getitem__(self, i):
            j = self.offset(i)
            k = scale(j)
            m = np.sqrt(k)
            return torch.tensor([i, j, k, m])


    class LambdaDataset(Dataset):
        __len__ = lambda self: 6  # noqa: E731
        __getitem__ = lambda self, i: torch.tensor([i])  # noqa: E731


    class CDataset(list):
        """Indexing comes from list.__getitem__, a C method."""

        def __init__(self):
            super().__init__(torch.tensor([i]) for i in range(6))


    class Killer(Dataset):
        """Kills its own worker process on one sample (a worker crash)."""

        def __len__(self):
            return 40

        def __getitem__(self, i):
            if i == 17:
                # die only once the main process holds samples 0..16, so the count is exact
                mark = os.path.join(os.environ["MARK_DIR"], "consumed-16")
                for _ in range(3000):
                    if os.path.exists(mark):
                        break
                    time.sleep(0.01)
                os.kill(os.getpid(), signal.SIGKILL)
            return i  # a plain int: no shared-memory tensor for the dying worker to hand over


    class Batched(Dataset):
        """Defines __getitems__, which torch's fetcher calls instead of __getitem__."""

        def __len__(self):
            return 12

        def __getitem__(self, i):
            return torch.tensor([i])

        def __getitems__(self, indices):
            out = [self[i] for i in indices]
            return out


    def mark_worker(worker_id):
        """The user's own worker_init_fn: must still run in every worker."""
        open(os.path.join(os.environ["MARK_DIR"], f"worker{worker_id}"), "w").close()


    class Wrapper(Dataset):
        """A user wrapper that keeps its source in .dataset."""

        def __init__(self, dataset):
            self.dataset = dataset

        def __len__(self):
            return len(self.dataset)

        def __getitem__(self, i):
            x = self.dataset[i]
            return x * 2
''')

DRIVER = textwrap.dedent('''
    import importlib.util, json, os, sys
    spec = importlib.util.spec_from_file_location("stallscope_lineprof_capture", sys.argv[1])
    capmod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = capmod
    spec.loader.exec_module(capmod)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

    import torch
    from torch.utils.data import ConcatDataset, DataLoader, Subset

    import datasets as D

    def main():
        out, target, depth, scenario = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
        events = []
        if scenario == "no_line_profiler":
            sys.modules["line_profiler"] = None  # import fails as if it were not installed
        cap = capmod.start(target, depth, out, events.append)
        original = DataLoader.__iter__

        def patched(self):
            cap.on_dataloader(self)
            return original(self)

        DataLoader.__iter__ = patched
        fetched = 0
        error = None
        here = os.path.dirname(os.path.abspath(__file__))
        os.environ["MARK_DIR"] = here
        kw = dict(batch_size=3)
        if scenario.startswith("png"):
            nw = int(scenario[-1])
            ds = D.PngDataset(D.make_pngs(os.path.join(here, "pngs"), 200))  # PNGS
            loaders = [DataLoader(ds, num_workers=nw, **kw)]
        elif scenario.startswith("norm"):
            nw = int(scenario[-1])
            loaders = [DataLoader(D.NormDataset(12), num_workers=nw, **kw)]
        elif scenario == "spawn":
            loaders = [DataLoader(D.NormDataset(8), num_workers=2, worker_init_fn=D.mark_worker,
                                  multiprocessing_context="spawn", **kw)]
        elif scenario == "main_then_workers":
            ds = D.NormDataset(9)
            loaders = [DataLoader(ds, num_workers=0, **kw), DataLoader(ds, num_workers=2, **kw)]
        elif scenario == "helpers":
            loaders = [DataLoader(D.Helpers(), num_workers=2, worker_init_fn=D.mark_worker, **kw)]
        elif scenario == "wrapped":
            inner = ConcatDataset([Subset(D.Helpers(), range(4)), D.NormDataset(3)])
            loaders = [DataLoader(D.Wrapper(inner), num_workers=0, **kw)]
        elif scenario == "batched":
            loaders = [DataLoader(D.Batched(), num_workers=2, **kw)]
        elif scenario == "lambda":
            loaders = [DataLoader(D.LambdaDataset(), **kw)]
        elif scenario == "c_method":
            loaders = [DataLoader(D.CDataset(), **kw)]
        elif scenario == "crash":
            loaders = [DataLoader(D.Killer(), num_workers=2, batch_size=None)]
        elif scenario == "persistent":
            dl = DataLoader(D.NormDataset(9), num_workers=2, persistent_workers=True, **kw)
            loaders = [dl, dl]  # two epochs; the workers outlive the loop
        elif scenario == "no_line_profiler":
            loaders = [DataLoader(D.NormDataset(3), **kw)]
        keep = []
        for dl in loaders:
            try:
                it = iter(dl)
                keep.append(it)  # still referenced at finish(), like a half-used iterator
                for batch in it:
                    fetched += len(batch) if hasattr(batch, "__len__") else 1
                    if scenario == "crash" and fetched == 17:
                        open(os.path.join(here, "consumed-16"), "w").close()
            except Exception as exc:  # a dead worker surfaces as RuntimeError (or worse)
                error = f"{type(exc).__name__}: {exc}"
        if scenario != "persistent":
            del keep[:]
        path = cap.finish()
        assert cap.finish() == path  # a second call changes nothing
        print(json.dumps({"fetched": fetched, "path": path, "events": events, "error": error}))

    if __name__ == "__main__":
        main()
''')


def run_driver(tmp_path: Path, scenario: str, target: str = "auto", depth: int = 0) -> dict:
    (tmp_path / "datasets.py").write_text(DATASETS)
    (tmp_path / "driver.py").write_text(DRIVER)
    out = tmp_path / "session"
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "driver.py"), str(CAPTURE), str(out), target,
         str(depth), scenario],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["session"] = out
    result["profiles"] = {p.qualname: p for p in lineprof.load_session(out)} \
        if (out / "lineprof").is_dir() else {}
    result["warnings"] = [e["message"] for e in result["events"] if e.get("event") == "warning"]
    return result


def body_hits(profile: lineprof.Profile) -> list[int]:
    """Hits of every executed line (the def line never counts)."""
    return [ln.hits for ln in profile.lines if ln.hits]


def line_with(profile: lineprof.Profile, text: str) -> lineprof.Line:
    found = [ln for ln in profile.lines if text in ln.source]
    assert len(found) == 1, (text, [ln.source for ln in profile.lines])
    return found[0]


@pytest.mark.parametrize("workers", [0, 2])
def test_png_decode_hits_equal_samples_fetched(tmp_path, workers):
    r = run_driver(tmp_path, f"png{workers}")
    assert r["fetched"] == PNGS
    p = r["profiles"]["PngDataset.__getitem__"]
    assert p.samples == PNGS
    assert p.workers == workers
    assert body_hits(p) == [PNGS] * 4  # every line of __getitem__, once per sample
    assert Path(r["path"]) == r["session"] / "lineprof" / "PngDataset.__getitem__.json"
    # The PNG decode dominates the function on 192x192 noise images (about 4x the array copy
    # per sample; enough samples that a worker's first-call costs do not decide it, nor a
    # few long preemptions of a loaded machine landing on the copy: 60 samples flipped once
    # at load 7).
    top = p.top_lines(1)[0]
    assert top.source.strip() == "img.load()"
    assert p.total_s > 0 and abs(sum(p.share(ln) for ln in p.lines) - 1) < 1e-9
    assert r["warnings"] == []


@pytest.mark.parametrize("workers", [0, 2])
def test_out_of_place_division_is_the_top_line(tmp_path, workers):
    r = run_driver(tmp_path, f"norm{workers}")
    assert r["fetched"] == 12
    p = r["profiles"]["NormDataset.__getitem__"]
    assert p.samples == 12 and body_hits(p) == [12] * 4
    heavy, light = line_with(p, "x / 255.0"), line_with(p, "div_(255.0)")
    assert p.top_lines(1)[0] is heavy, lineprof.format_table(p)
    assert heavy.total_s > light.total_s
    # The saved source is the file's source, line for line.
    src = (tmp_path / "datasets.py").read_text().splitlines()
    assert all(src[ln.lineno - 1] == ln.source for ln in p.lines)
    assert lineprof.match_source(p).warning is None


def test_spawned_workers_reimport_the_capture_by_path(tmp_path):
    r = run_driver(tmp_path, "spawn")
    p = r["profiles"]["NormDataset.__getitem__"]
    assert r["fetched"] == 8 and p.samples == 8 and p.workers == 2
    assert body_hits(p) == [8] * 4
    assert sorted(f.name for f in tmp_path.glob("worker*")) == ["worker0", "worker1"]


def test_forked_workers_do_not_count_the_parents_samples_twice(tmp_path):
    r = run_driver(tmp_path, "main_then_workers")
    p = r["profiles"]["NormDataset.__getitem__"]
    assert r["fetched"] == 18
    assert p.samples == 18 and body_hits(p) == [18] * 4 and p.workers == 2


def test_persistent_workers_alive_at_finish_still_report(tmp_path):
    r = run_driver(tmp_path, "persistent")
    p = r["profiles"]["NormDataset.__getitem__"]
    assert r["fetched"] == 18 and p.samples == 18 and body_hits(p) == [18] * 4
    assert not (r["session"] / "lineprof" / ".parts").exists()


def test_depth_one_profiles_same_file_helpers(tmp_path):
    r = run_driver(tmp_path, "helpers", depth=1)
    profs = r["profiles"]
    assert set(profs) == {"Helpers.__getitem__", "Helpers.offset", "scale"}
    assert profs["Helpers.__getitem__"].root and not profs["scale"].root
    for name in profs:
        assert profs[name].samples == 10 and set(body_hits(profs[name])) == {10}, name
    assert r["fetched"] == 10
    assert sorted(f.name for f in tmp_path.glob("worker*")) == ["worker0", "worker1"]
    # Without depth, only __getitem__.
    sub = tmp_path / "d0"
    sub.mkdir()
    r0 = run_driver(sub, "helpers")
    assert set(r0["profiles"]) == {"Helpers.__getitem__"}


def test_batched_getitems_is_profiled_too(tmp_path):
    r = run_driver(tmp_path, "batched")
    profs = r["profiles"]
    assert r["fetched"] == 12
    assert profs["Batched.__getitems__"].samples == 4  # one call per batch of 3
    assert profs["Batched.__getitem__"].samples == 12
    assert body_hits(profs["Batched.__getitem__"]) == [12]


def test_wrappers_are_unwrapped_to_the_classes_that_define_getitem(tmp_path):
    r = run_driver(tmp_path, "wrapped")
    profs = r["profiles"]
    assert set(profs) == {"Wrapper.__getitem__", "Helpers.__getitem__",
                          "NormDataset.__getitem__"}
    assert profs["Wrapper.__getitem__"].samples == 7
    assert profs["Helpers.__getitem__"].samples == 4
    assert profs["NormDataset.__getitem__"].samples == 3
    assert sorted(profs["Wrapper.__getitem__"].wraps) == ["Helpers.__getitem__",
                                                           "NormDataset.__getitem__"]
    assert lineprof.primary(list(profs.values())).qualname == "NormDataset.__getitem__"


def test_explicit_target_by_file_path_and_by_module(tmp_path):
    r = run_driver(tmp_path, "helpers", target=f"{tmp_path / 'datasets.py'}:Helpers.offset")
    assert set(r["profiles"]) == {"Helpers.offset"}
    assert r["profiles"]["Helpers.offset"].samples == 10
    sub = tmp_path / "m"
    sub.mkdir()
    r = run_driver(sub, "norm0", target="datasets:NormDataset.__getitem__")
    assert r["profiles"]["NormDataset.__getitem__"].samples == 12


def test_target_not_found_names_what_exists(tmp_path):
    r = run_driver(tmp_path, "norm0", target="datasets:NormDatset.__getitem__")
    assert r["path"] is None and r["profiles"] == {}
    msg = " ".join(r["warnings"])
    assert "NormDatset.__getitem__ not found in module datasets" in msg
    assert "NormDataset" in msg and "PngDataset" in msg  # the classes that do exist
    sub = tmp_path / "m"
    sub.mkdir()
    r = run_driver(sub, "norm0", target="datasets:NormDataset.get_item")
    msg = " ".join(r["warnings"])
    assert "methods of NormDataset" in msg and "__getitem__" in msg
    sub2 = tmp_path / "n"
    sub2.mkdir()
    r = run_driver(sub2, "norm0", target="nosuchmodule:X.y")
    assert "module nosuchmodule was not imported by the script" in " ".join(r["warnings"])


@pytest.mark.parametrize("scenario,words", [("lambda", "is a lambda"),
                                            ("c_method", "defined in C")])
def test_unprofilable_getitem_says_so(tmp_path, scenario, words):
    r = run_driver(tmp_path, scenario)
    assert r["fetched"] == 6  # the script still runs
    assert r["path"] is None
    assert any(words in w and "__getitem__" in w for w in r["warnings"]), r["warnings"]


def test_worker_crash_keeps_the_other_workers_stats(tmp_path):
    r = run_driver(tmp_path, "crash")
    assert "exited unexpectedly" in r["error"]  # the DataLoader reports the dead worker
    p = r["profiles"]["Killer.__getitem__"]
    # Samples 0..16 arrived in order; worker 0 made the 9 even ones and exited cleanly.
    assert r["fetched"] == 17
    assert p.samples >= 9
    crash = [w for w in r["warnings"] if "crashed or killed" in w]
    assert len(crash) == 1, r["warnings"]
    assert any("crashed or killed" in w for w in p.warnings)


def test_missing_line_profiler_gives_the_install_command(tmp_path):
    r = run_driver(tmp_path, "no_line_profiler")
    assert r["fetched"] == 3 and r["path"] is None
    (event,) = [e for e in r["events"] if e.get("code") == "line_profiler_missing"]
    assert event["install"] == f"{sys.executable} -m pip install line_profiler"
    assert event["install"] in event["message"]


def test_iterable_dataset_profiles_its_iter_and_says_when_there_is_nothing():
    """(Changed by issue 19: an IterableDataset's __iter__ is now what auto profiles.)"""
    import torch
    import torch.utils.data as tud

    from stallscope.core.capture import lineprof_capture

    class Stream(tud.IterableDataset):
        def __iter__(self):
            yield from range(3)

    classes, warnings = lineprof_capture._auto_classes(Stream())
    assert classes == [(Stream, "__iter__", [])] and warnings == []
    # torch's own abstract methods are nothing to profile, and the message says where to look
    classes, warnings = lineprof_capture._auto_classes(tud.ChainDataset([]))
    assert classes == [] and "has no __getitem__ nor __iter__ of its own" in warnings[0]
    # a map-style dataset of torch's own still gets profiled
    classes, warnings = lineprof_capture._auto_classes(tud.TensorDataset(torch.zeros(2)))
    assert [(k.__name__, m) for k, m, _ in classes] == [("TensorDataset", "__getitem__")]
    assert warnings == []


ITERABLE = '''
import time, torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

class Stream(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        start, step = (info.id, info.num_workers) if info else (0, 1)
        for i in range(start, 24, step):
            time.sleep(0.002)
            yield torch.full((4,), float(i))

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x in DataLoader(Stream(), batch_size=4, num_workers=int(__import__("sys").argv[1])):
    model(x).sum().backward()
    opt.step()
'''


@pytest.mark.parametrize("workers", [0, 2])
def test_iterable_dataset_generator_body_is_profiled_under_the_runner(tmp_path, workers):
    """--lineprof auto finds the IterableDataset's __iter__ and profiles its generator body
    through every resumption (not only the call that creates the generator)."""
    from runner_helpers import run, write_script

    script = write_script(tmp_path, ITERABLE)
    proc, session = run(tmp_path, script, "--lineprof", "auto", "--no-stop-after-window",
                        args=[str(workers)])
    assert proc.returncode == 0, proc.stderr
    (profile,) = lineprof.load_session(session)
    assert profile.qualname == "Stream.__iter__" and profile.samples == 24
    sleep = next(ln for ln in profile.lines if "time.sleep" in ln.source)
    assert sleep.hits == 24 and sleep.total_s >= 24 * 0.002 * 0.9
    assert profile.total_s >= sleep.total_s


def test_explicit_target_in_the_script_names_main(tmp_path):
    from runner_helpers import run, write_script

    script = write_script(tmp_path, ITERABLE, name="train.py")
    proc, session = run(tmp_path, script, "--lineprof", "train:Stream.__iter__",
                        "--no-stop-after-window", args=["0"])
    assert proc.returncode == 0, proc.stderr
    assert "use --lineprof __main__:Stream.__iter__" in proc.stderr
    assert "a class of the script is in module __main__" in proc.stderr
