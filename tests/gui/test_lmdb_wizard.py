"""The LMDB wizard walked end to end on a small real image folder (screenshots of every page
saved with STALLSCOPE_SHOTS), plus cancel + resume and a refused destination."""

from __future__ import annotations

import os
import textwrap

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from image_folders import flower_folder
from PySide6.QtWidgets import QApplication, QWizard
from shots import save_shot

from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.destination import destination_state
from stallscope.core.lmdb.snippet import factory_candidates
from stallscope.gui.controllers.lmdb import LMDBJobs, lmdb_wizard, open_lmdb_wizard
from stallscope.gui.workers import JobRunner


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch, qapp):
    monkeypatch.setenv("STALLSCOPE_CONFIG_DIR", str(tmp_path / "config"))
    from stallscope.gui import theme

    theme.apply_theme(qapp, "light")  # screenshots as the app shows them


def shot(wizard: QWizard, name: str) -> None:
    save_shot(wizard, f"lmdb_{name}")


@pytest.mark.runner  # the conversion's decoding workers (a process pool)
def test_wizard_end_to_end_converts_verifies_measures_and_offers_code(qtbot, tmp_path):
    src = tmp_path / "flowers"
    flower_folder(src)
    wizard = lmdb_wizard()
    qtbot.addWidget(wizard)
    wizard.show()
    # every job runs on the wizard's controller (its JobRunner); no page or wizard runs one
    assert isinstance(wizard.jobs, LMDBJobs) and wizard.jobs.parent() is wizard
    holders = [wizard, wizard.source_page, wizard.options_page, wizard.convert_page,
               wizard.result_page]
    assert not [v for w in holders for v in vars(w).values() if isinstance(v, JobRunner)]

    page = wizard.source_page
    page.spec_edit.setText(str(src))
    qtbot.waitUntil(page.isComplete, timeout=20_000)
    assert wizard.info.count == 13 and wizard.info.classes == ["daisy", "tulip"]
    assert page.thumbs.count() == 8
    assert "13 samples in 2 classes" in page.status.text()
    shot(wizard, "1_source")

    wizard.next()
    opts = wizard.options_page
    assert opts.dst_edit.text() == str(tmp_path / "flowers.lmdb")
    # two sizes in the folder (64x48 and 40x56): the survey warns and offers a resize + crop
    qtbot.waitUntil(lambda: "sizes in" in opts.shapes.text(), timeout=20_000)
    assert "2 sizes in 13 sampled" in opts.shapes.text() or "2 sizes in 12" in opts.shapes.text()
    assert "--resize 48 --crop 48" in opts.shapes.text() and opts.apply_btn.isVisibleTo(opts)
    opts.apply_btn.click()
    assert opts.resize_box.isChecked() and opts.resize_spin.value() == 48
    assert opts.crop_box.isChecked() and (opts.crop_w.value(), opts.crop_h.value()) == (48, 48)
    qtbot.waitUntil(lambda: "3x48x48 in all" in opts.shapes.text(), timeout=20_000)
    assert not opts.apply_btn.isVisibleTo(opts)
    opts.resize_spin.setValue(32)
    opts.crop_w.setValue(32)
    opts.crop_h.setValue(32)
    opts.workers_spin.setValue(2)
    qtbot.waitUntil(lambda: "3x32x32 in all" in opts.shapes.text(), timeout=20_000)
    qtbot.waitUntil(lambda: "on disk" in opts.estimate.text(), timeout=20_000)
    assert "image: uint8 3x32x32" in opts.estimate.text()
    qtbot.waitUntil(opts.isComplete, timeout=5_000)
    assert "enough" in opts.space.text() and "new LMDB" in opts.dst_state.text()
    shot(wizard, "2_options")

    wizard.next()
    conv = wizard.convert_page
    qtbot.waitUntil(conv.isComplete, timeout=60_000)
    assert wizard.result.count == 12 and [s["path"] for s in wizard.result.skipped] == [
        "tulip/broken.png"
    ]
    assert conv.bar.value() == conv.bar.maximum() == 13
    assert "Done: 12 samples" in conv.status.text()
    shot(wizard, "3_convert")

    wizard.next()
    result = wizard.result_page
    qtbot.waitUntil(lambda: result.verification is not None, timeout=30_000)
    qtbot.waitUntil(lambda: result.throughput is not None, timeout=60_000)
    assert result.verification.ok and result.verification.checked == 12
    assert "identical" in result.verify_label.text()
    assert result.skipped.count() == 1 and "broken.png" in result.skipped.item(0).text()
    heights = result.bars.opts["height"]
    t = result.throughput
    assert list(heights) == [t.before.samples_per_s, t.after.samples_per_s]
    assert t.after.samples_per_s > t.before.samples_per_s > 0
    assert t.verdict() in result.chart_note.text() and t.verdict().endswith("faster")
    snippet = result.snippet.toPlainText()
    assert f"LMDBDataset({str(tmp_path / 'flowers.lmdb')!r})" in snippet
    # the snippet's loader is the one the speed check measured
    assert f"batch_size={t.batch_size}, shuffle=True, num_workers={t.num_workers}" in snippet
    result.copy_snippet()
    assert QApplication.clipboard().text() == snippet
    shot(wizard, "4_result")

    ds = LMDBDataset(tmp_path / "flowers.lmdb")
    assert len(ds) == 12 and ds[0][0].shape == (3, 32, 32)
    ds.close()
    wizard.close()


SLOW = textwrap.dedent(
    """
    import time
    import numpy as np

    class Slow:
        def __len__(self):
            return 40

        def __getitem__(self, i):
            time.sleep(0.05)
            return np.full((4, 4), i, np.int16), i

    def make_slow():
        return Slow()
    """
)


@pytest.mark.runner  # the conversion's decoding workers (a process pool)
def test_cancel_keeps_work_and_resume_finishes_exactly(qtbot, tmp_path):
    (tmp_path / "slow.py").write_text(SLOW)
    assert factory_candidates(str(tmp_path / "slow.py")) == ["make_slow", "Slow"]
    wizard = open_lmdb_wizard(None, f"{tmp_path / 'slow.py'}:make_slow")
    qtbot.addWidget(wizard)
    qtbot.waitUntil(wizard.source_page.isComplete, timeout=20_000)
    assert "Factory dataset: 40 samples" in wizard.source_page.status.text()
    assert "(ndarray, int)" in wizard.source_page.details.text()
    shot(wizard, "5_factory_source")
    wizard.next()
    opts = wizard.options_page
    opts.workers_spin.setValue(1)
    qtbot.waitUntil(opts.isComplete, timeout=20_000)
    wizard.next()
    conv = wizard.convert_page
    qtbot.waitUntil(lambda: conv.bar.value() >= 6, timeout=60_000)
    conv.cancel()
    qtbot.waitUntil(lambda: conv.resume_btn.isEnabled(), timeout=30_000)
    assert "Cancelled at" in conv.status.text() and not conv.isComplete()
    state = destination_state(wizard.destination())
    assert 0 < state.progress["next_source"] < 40 and not state.complete
    shot(wizard, "6_cancelled")
    conv.resume_btn.click()
    qtbot.waitUntil(conv.isComplete, timeout=60_000)
    assert wizard.result.resumed_from == state.progress["next_source"]
    start = state.progress["next_source"]
    assert (f"Done: 40 samples; resumed at {start:,}, this run converted {40 - start:,} in "
            in conv.status.text())
    ds = LMDBDataset(wizard.destination())
    assert [int(ds[k][1]) for k in range(len(ds))] == list(range(40))
    assert all(int(ds[k][0][0, 0]) == k for k in range(40))
    ds.close()


def test_options_refuse_a_destination_that_is_not_ours(qtbot, tmp_path):
    src = tmp_path / "imgs"
    flower_folder(src)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    wizard = lmdb_wizard(None, str(src))
    qtbot.addWidget(wizard)
    wizard.show()
    qtbot.waitUntil(wizard.source_page.isComplete, timeout=20_000)
    wizard.next()
    opts = wizard.options_page
    opts.dst_edit.setText(str(busy))
    qtbot.waitUntil(lambda: "on disk" in opts.estimate.text(), timeout=20_000)
    assert not opts.isComplete()
    assert "not empty" in opts.dst_state.text()
    assert not wizard.button(QWizard.WizardButton.CommitButton).isEnabled()
    shot(wizard, "7_refused")
    wizard.close()
