"""Write PNGs of the app on real traces at three window sizes, and say what is clipped in each.

    .venv/bin/python tests/gui/make_screenshots.py OUT_DIR     every subject at every size
    .venv/bin/python tests/gui/make_screenshots.py --docs      docs/screenshots/: DOCS at 1400x900

Subjects (SIZES: 1024x700, 1400x900, 2560x1440):
  kineto_nw0          ResNet-50, num_workers=0: the data-loading-bound trace
  hta_nccl            DDP on an A100: NCCL on its own streams (Streams on: one labelled
                      sub-lane per stream)
  hta_cpu_only        a trace without GPU activity: step time and threads
  hta_mtia            an MTIA inference trace: the accelerator named by its kind
  hta_sampled_ranks   two ranks of one job (hta_sampled_rank-0/1) in one folder: the rank table
  compare_nw0_nw4     num_workers 0 -> 4: deltas and both summaries
  compare_cpu_only    two CPU-only tune sessions (tests/core/steady_sessions): the main thread's
                      time per step instead of a GPU chart
  ranks_synth16       the Ranks tab on a generated 16-rank job, rank 11 slow
  heatmap_demo        the bundled demo run with --lineprof auto: its line heatmap tab
  lmdb_1_source .. lmdb_4_result   the LMDB wizard's pages on a folder of images of two sizes
Each PNG is stored in 256 colours (max coverage, no dithering) to stay small; each line printed
names a PNG, then any label or button cut short in it (reference_images.clipped_labels); the
exit status is 1 when something was. Runs in a throwaway config and data dir.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))  # synth.py: the generated many-rank job
FIXTURES = Path(os.environ.get("STALLSCOPE_FIXTURES") or ROOT.parent / "shared" / "fixtures"
                / "traces")
SESSIONS = ROOT / "tests" / "core" / "steady_sessions"
SIZES = ((1024, 700), (1400, 900), (2560, 1440))
DOCS = ("kineto_nw0", "hta_nccl", "hta_cpu_only", "hta_mtia", "compare_nw0_nw4",
        "ranks_synth16", "heatmap_demo", "lmdb_2_options")


def fixture(prefix: str) -> Path:
    return sorted(FIXTURES.glob(prefix + "*"))[0]


def wait_until(done: Callable[[], bool], timeout_s: float = 120.0) -> None:
    from PySide6.QtWidgets import QApplication

    end = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {done}")
        QApplication.processEvents()
        time.sleep(0.02)


def demo_with_line_stats(root: Path) -> Path:
    """The bundled demo under the runner with --lineprof auto (about 15 s)."""
    from stallscope.core.capture import runner
    from stallscope.resources import RESOURCES

    demo = RESOURCES / "demo" / "train_demo.py"
    session = root / "demo"
    done = subprocess.run([sys.executable, str(Path(runner.__file__)), "--session",
                           str(session), "--lineprof", "auto", "--", str(demo)],
                          capture_output=True, text=True, cwd=str(demo.parent), timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"the demo run failed: {done.stderr[-2000:]}")
    return session


def image_folder(root: Path) -> Path:
    """Two classes of colour images in two sizes (the wizard's size survey warns), one broken."""
    import numpy as np
    from PIL import Image

    for label, cls in enumerate(("daisy", "tulip")):
        (root / cls).mkdir(parents=True)
        for i in range(8):
            h, w = (48, 64) if i % 2 else (60, 80)
            yy, xx = np.mgrid[0:h, 0:w] / h
            r = (np.sin(xx * (i + 1) + label * 2) * 100 + 128).astype(np.uint8)
            g = (yy * 200 + 30 * i).clip(0, 255).astype(np.uint8)
            b = np.full_like(r, 60 + 100 * label)
            Image.fromarray(np.stack([r, g, b], -1)).save(root / cls / f"{cls}_{i}.png")
    (root / "tulip" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    return root


def window_subjects(scratch: Path) -> dict[str, tuple]:
    """name -> (path to open, path to compare with, tab whose title starts so, streams on)."""
    from synth import make_job

    ranks = scratch / "hta_sampled"
    ranks.mkdir()
    for r in (0, 1):
        shutil.copy(fixture(f"hta_sampled_rank-{r}"), ranks)
    synth = scratch / "synth16"
    make_job(synth, 16, fixture("hta_sampled_rank-0"), slow_rank=11, slow_us=15_000.0, seed=3)
    return {
        "kineto_nw0": (fixture("kineto_nw0"), None, None, False),
        "hta_nccl": (fixture("hta_nccl_parser_config_nccl_data"), None, None, True),
        "hta_cpu_only": (fixture("hta_cpu_only"), None, None, False),
        "hta_mtia": (fixture("hta_mtia_inference_rank_0"), None, None, False),
        "hta_sampled_ranks": (ranks, None, None, False),
        "compare_nw0_nw4": (fixture("kineto_nw0"), fixture("kineto_nw4_worker0.1623212756351"),
                            None, False),
        "compare_cpu_only": (SESSIONS / "io-as-written-2", SESSIONS / "io-16workers-2", None,
                             False),
        "ranks_synth16": (synth, None, "Ranks", False),
        "heatmap_demo": (demo_with_line_stats(scratch), None, "Line heatmap", False),
    }


def shoot_window(name: str, subject: tuple, size: tuple[int, int]):
    from PySide6.QtWidgets import QApplication

    from stallscope.gui.main_window import MainWindow

    path, compare, tab, streams = subject
    window = MainWindow(persist=False)
    window.resize(*size)
    window.show()
    window.open_path(str(path))
    window.wait_for_load()
    if compare is not None:
        window.open_compare(str(compare))
        window.wait_for_load()
    if window.messages.level == "error" and window.messages.text:
        raise SystemExit(f"{name}: {window.messages.text}")
    if streams:
        window.analysis.timeline.streams_button.setChecked(True)
    if tab is not None:
        index = next((i for i in range(window.tabs.count())
                      if window.tabs.tabText(i).startswith(tab)), None)
        if index is None:
            raise SystemExit(f"{name}: no {tab} tab")
        window.tabs.setCurrentIndex(index)
    for _ in range(3):  # axes that size themselves to their labels settle on a later pass
        QApplication.processEvents()
        time.sleep(0.05)
    return window


def wizard_pages(folder: Path, size: tuple[int, int]):
    """The LMDB wizard walked through its pages: yields (page name, wizard) at each."""
    from PIL import Image
    from PySide6.QtWidgets import QApplication

    from stallscope.gui.controllers.lmdb import lmdb_wizard

    # import PIL's plugins and torch here first, not in a worker thread while this thread
    # collects (the reference test's note: a crash now and then under PySide6 6.12.0)
    Image.init()
    import torch  # noqa: F401

    wizard = lmdb_wizard()
    wizard.resize(*size)
    wizard.show()
    wizard.source_page.spec_edit.setText(str(folder))
    wait_until(wizard.source_page.isComplete)
    yield "lmdb_1_source", wizard
    wizard.next()
    opts = wizard.options_page
    wait_until(lambda: "on disk" in opts.estimate.text() and opts.isComplete())
    yield "lmdb_2_options", wizard
    wizard.next()
    wait_until(wizard.convert_page.isComplete, 300)
    yield "lmdb_3_convert", wizard
    wizard.next()
    result = wizard.result_page
    wait_until(lambda: result.verification is not None and result.throughput is not None, 300)
    for _ in range(10):  # the chart's auto-range settles on a later pass of the event loop
        QApplication.processEvents()
        time.sleep(0.03)
    yield "lmdb_4_result", wizard
    wizard.close()
    wizard.deleteLater()
    QApplication.processEvents()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="folder for the PNGs (every subject and size)")
    parser.add_argument("--docs", action="store_true",
                        help="replace docs/screenshots/*.png with DOCS at 1400x900")
    args = parser.parse_args(argv)
    if not args.docs and not args.out:
        parser.error("give OUT_DIR or --docs")
    out = ROOT / "docs" / "screenshots" if args.docs else Path(args.out)
    sizes = ((1400, 900),) if args.docs else SIZES
    wanted = set(DOCS) if args.docs else None
    out.mkdir(parents=True, exist_ok=True)
    if args.docs:
        for old in out.glob("*.png"):
            old.unlink()
    scratch = Path(tempfile.mkdtemp(prefix="stallscope-shots-"))
    os.environ.setdefault("STALLSCOPE_CONFIG_DIR", str(scratch / "config"))
    os.environ.setdefault("XDG_DATA_HOME", str(scratch / "data"))
    from PySide6.QtWidgets import QApplication
    from reference_images import clipped_labels, quantized

    app = QApplication.instance() or QApplication([])
    from stallscope.gui import app as app_module
    from stallscope.gui import pyside_workaround, theme
    from stallscope.gui.widgets import install_plain_text_guard

    app_module.install_message_filter()
    pyside_workaround.collect_on_gui_thread()
    install_plain_text_guard(app)
    theme.apply_theme(app, "light")
    clipped = 0

    def save(name: str, widget, size: tuple[int, int]) -> None:
        nonlocal clipped
        target = out / f"{name}_{size[0]}x{size[1]}.png"
        for _ in range(3):  # a text set just now is laid out on the event loop's next pass
            QApplication.processEvents()
        quantized(widget.grab().toImage()).save(target, optimize=True)
        cut = clipped_labels(widget)
        clipped += len(cut)
        print(f"{target} ({target.stat().st_size // 1024} KB)", flush=True)
        for line in cut:
            print(f"    clipped: {line}", flush=True)

    try:
        subjects = window_subjects(scratch)
        for name, subject in subjects.items():
            if wanted is not None and name not in wanted:
                continue
            for size in sizes:
                window = shoot_window(name, subject, size)
                save(name, window, size)
                window.close()
                window.deleteLater()
                app.processEvents()
        if wanted is None or any(n.startswith("lmdb_") for n in wanted):
            for size in sizes:
                folder = image_folder(scratch / f"flowers-{size[0]}")
                for name, wizard in wizard_pages(folder, size):
                    if wanted is None or name in wanted:
                        save(name, wizard, size)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{clipped} clipped label(s)" if clipped else "nothing clipped")
    return 1 if clipped else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
