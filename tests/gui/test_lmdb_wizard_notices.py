"""The LMDB wizard says what `convert` says beyond its figures: 16-bit images made 8-bit,
a crop larger than the images (before converting too), images beside the class folders; and
--measure's caveat."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from image_folders import noise_classes
from PIL import Image
from shots import save_shot

from stallscope.gui.controllers.lmdb import lmdb_wizard


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch, qapp):
    monkeypatch.setenv("STALLSCOPE_CONFIG_DIR", str(tmp_path / "config"))
    from stallscope.gui import theme

    theme.apply_theme(qapp, "light")


@pytest.mark.runner  # the conversion's decoding workers (a process pool)
def test_the_convert_page_shows_every_warning_convert_prints(qtbot, tmp_path):
    src = noise_classes(tmp_path / "scans", 2, 3, (16, 20), seed=8)
    deep = np.linspace(0, 4000, 16 * 20, dtype=np.uint16).reshape(16, 20)
    Image.fromarray(deep).save(src / "c1" / "deep.png")  # I;16: values above 255 clipped
    Image.new("RGB", (16, 20)).save(src / "cover.png")  # beside the class folders
    wizard = lmdb_wizard(None, str(src))
    qtbot.addWidget(wizard)
    wizard.resize(900, 700)
    wizard.show()
    qtbot.waitUntil(wizard.source_page.isComplete, timeout=20_000)
    wizard.next()
    opts = wizard.options_page
    opts.crop_box.setChecked(True)
    opts.crop_w.setValue(24)
    opts.crop_h.setValue(16)
    opts.workers_spin.setValue(1)
    qtbot.waitUntil(opts.isComplete, timeout=20_000)
    # said before converting too, from the sampled images' headers
    qtbot.waitUntil(lambda: "crop is larger" in opts.shapes.text(), timeout=20_000)
    assert ("warning: the 24x16 crop is larger than 7 of 7 sampled images (20x16: 7): it will "
            "pad them with black; resize to at least the crop size first") in opts.shapes.text()
    save_shot(wizard, "lmdb_notices_options")
    wizard.next()
    conv = wizard.convert_page
    qtbot.waitUntil(conv.isComplete, timeout=60_000)
    text = conv.summary.text()
    save_shot(wizard, "lmdb_notices")
    assert wizard.result.narrowed and wizard.result.padded
    assert ("⚠</b> 1 image(s) of more than 8 bits per channel (I;16: 1, e.g. c1/deep.png) "
            "were converted to 8-bit RGB") in text
    assert "⚠</b> --crop 24x16 is larger than 7 image(s) (20x16: 7, e.g. c0/000.png)" in text
    assert "1 image(s) beside the class folders (e.g. cover.png) are not converted" in text
    wizard.next()
    result = wizard.result_page
    qtbot.waitUntil(lambda: result.throughput is not None, timeout=60_000)
    assert "caveat: only 7 samples" in result.chart_note.text()
    save_shot(wizard, "lmdb_notices_result")
    wizard.close()


def test_keep_mode_with_grayscale_beside_rgb_offers_rgb_not_a_resize(qtbot, tmp_path):
    src = noise_classes(tmp_path / "mixed", 2, 3, (16, 16), seed=9)
    Image.open(src / "c1" / "000.png").convert("L").save(src / "c1" / "000.png")
    wizard = lmdb_wizard(None, str(src))
    qtbot.addWidget(wizard)
    wizard.resize(900, 700)
    wizard.show()
    qtbot.waitUntil(wizard.source_page.isComplete, timeout=20_000)
    wizard.next()
    opts = wizard.options_page
    opts.rgb_box.setChecked(False)  # --keep-mode
    qtbot.waitUntil(lambda: "2 sizes in 6 sampled" in opts.shapes.text(), timeout=20_000)
    assert "convert with every image as RGB (no --keep-mode)" in opts.shapes.text()
    assert opts.apply_btn.isVisibleTo(opts)
    assert opts.apply_btn.text() == "Convert every image to RGB"
    save_shot(wizard, "lmdb_keep_mode")
    opts.apply_btn.click()
    assert opts.rgb_box.isChecked() and not opts.resize_box.isChecked()
    qtbot.waitUntil(lambda: "3x16x16 in all" in opts.shapes.text(), timeout=20_000)
    wizard.close()
