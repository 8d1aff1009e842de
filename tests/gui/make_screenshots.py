"""Write PNGs of the app on real traces, at three window sizes (for docs/ and for looking at them).

    .venv/bin/python tests/gui/make_screenshots.py [OUT_DIR]   (default docs/screenshots)

For each size in SIZES (1024x700, 1400x900, 2560x1440):
  kineto_nw0_<size>.png          ResNet-50, num_workers=0: the data-loading-bound trace
  hta_nccl_<size>.png            DDP on an A100 (NCCL, backward on the autograd threads)
  hta_sampled_ranks_<size>.png   two ranks of one job (hta_sampled_rank-0/1) in one folder
  hta_cpu_only_<size>.png        a trace without GPU activity: step time and threads
  hta_mtia_<size>.png            an MTIA inference trace: the accelerator named by its kind
  compare_nw0_nw4_<size>.png     num_workers 0 -> 4: deltas and both summaries
and at 1400x900 only: hta_df_index_resolver_1400x900.png (V100, backward and queued work) and
ranks_tab_synth16_1400x900.png (the Ranks tab on a generated 16-rank job, rank 11 slow).
Each is stored in 256 colours (max coverage, no dithering) to stay small. Runs in a throwaway
config dir.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))  # synth.py: the generated many-rank job
FIXTURES = ROOT.parent / "shared" / "fixtures" / "traces"
SIZES = ((1024, 700), (1400, 900), (2560, 1440))


def fixture(prefix: str) -> Path:
    return sorted(FIXTURES.glob(prefix + "*"))[0]


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "docs" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("STALLSCOPE_CONFIG_DIR", tempfile.mkdtemp(prefix="stallscope-cfg-"))
    from PySide6.QtWidgets import QApplication
    from reference_images import quantized

    app = QApplication.instance() or QApplication([])
    from stallscope.gui import app as app_module
    from stallscope.gui import theme
    from stallscope.gui.main_window import MainWindow

    app_module.install_message_filter()
    theme.apply_theme(app, "light")
    ranks = Path(tempfile.mkdtemp(prefix="stallscope-ranks-")) / "hta_sampled"
    ranks.mkdir()
    for r in (0, 1):
        shutil.copy(fixture(f"hta_sampled_rank-{r}"), ranks)
    subjects = {
        "kineto_nw0": (fixture("kineto_nw0"), None),
        "hta_nccl": (fixture("hta_nccl_parser_config_nccl_data"), None),
        "hta_sampled_ranks": (ranks, None),
        "hta_cpu_only": (fixture("hta_cpu_only"), None),
        "hta_mtia": (fixture("hta_mtia_inference_rank_0"), None),
        "compare_nw0_nw4": (fixture("kineto_nw0"), fixture("kineto_nw4_worker0.1623212756351")),
    }
    subjects["hta_df_index_resolver"] = (fixture("hta_df_index_resolver"), None)
    from synth import make_job

    synth = ranks.parent / "synth16"
    make_job(synth, 16, fixture("hta_sampled_rank-0"), slow_rank=11, slow_us=15_000.0, seed=3)
    subjects["ranks_tab_synth16"] = (synth, None)
    once = {"hta_df_index_resolver", "ranks_tab_synth16"}
    for name, (path, compare) in subjects.items():
        for w, h in SIZES if name not in once else ((1400, 900),):
            window = MainWindow(persist=False)
            window.resize(w, h)
            window.show()
            window.open_path(str(path))
            window.wait_for_load()
            if compare is not None:
                window.open_compare(str(compare))
                window.wait_for_load()
            if window.messages.level == "error" and window.messages.text:
                raise SystemExit(f"{name}: {window.messages.text}")
            app.processEvents()
            target = out / f"{name}_{w}x{h}.png"
            quantized(window.grab().toImage()).save(target, optimize=True)
            print(f"{target} ({target.stat().st_size // 1024} KB)")
            window.close()
            window.deleteLater()
            app.processEvents()
    shutil.rmtree(ranks.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
