"""The LMDB wizard's first page shows the shape survey (each size and how many) where sizes
vary, instead of one sample's size beside a "sizes vary" warning (core/lmdb/inspection.py)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from image_folders import flower_folder
from shots import save_shot

from stallscope.core.lmdb.inspection import inspect_source
from stallscope.gui.controllers.lmdb import lmdb_wizard


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch, qapp):
    monkeypatch.setenv("STALLSCOPE_CONFIG_DIR", str(tmp_path / "config"))
    from stallscope.gui import theme

    theme.apply_theme(qapp, "light")


def source_page_text(qtbot, src) -> str:
    wizard = lmdb_wizard()
    qtbot.addWidget(wizard)
    wizard.resize(900, 700)
    wizard.show()
    page = wizard.source_page
    page.spec_edit.setText(str(src))
    qtbot.waitUntil(page.isComplete, timeout=20_000)
    save_shot(wizard, f"lmdb_survey_{src.name}")
    return page.details.text()


def test_varied_sizes_show_the_survey_with_counts(qtbot, tmp_path):
    src = tmp_path / "varied"
    flower_folder(src, varied=True)
    info = inspect_source(str(src), n_preview=8)
    (big, n_big), (small, n_small) = info.shapes
    assert {big, small} == {"3x48x64", "3x56x40"} and n_big + n_small == info.surveyed == 12
    assert info.survey_lines() == [f"{big}: {n_big} of 12 sampled",
                                   f"{small}: {n_small} of 12 sampled"]
    assert info.field_info[0] == "image: uint8 (shape per sample)"  # not sample 0's size
    text = source_page_text(qtbot, src)
    assert "<b>Sizes sampled</b> (image):" in text
    assert f"{big}: {n_big} of 12 sampled" in text and f"{small}: {n_small} of 12" in text
    assert "image: uint8 (shape per sample)" in text and "image: uint8 3x" not in text
    assert "2 sizes in 12 sampled" in text  # the warning and its fix stay


def test_one_size_shows_it_and_no_survey(qtbot, tmp_path):
    src = tmp_path / "same"
    flower_folder(src, varied=False)
    info = inspect_source(str(src), n_preview=8)
    assert info.shapes == [("3x48x64", 12)] and info.field_info[0] == "image: uint8 3x48x64"
    text = source_page_text(qtbot, src)
    assert "Sizes sampled" not in text and "image: 3x48x64 in all 12 sampled" in text


def test_survey_lines_fold_a_long_tail():
    from stallscope.core.lmdb.inspection import SourceInfo

    shapes = [(f"3x{h}x{h}", 10 - h) for h in range(1, 9)]  # 8 sizes: 9+8+...+2 = 44 samples
    info = SourceInfo("s", "folder", 44, [], ["image"], [], {}, [], 1.0, 1, [], shapes, 44)
    lines = info.survey_lines(shown=3)
    assert lines[:3] == ["3x1x1: 9 of 44 sampled", "3x2x2: 8 of 44 sampled",
                         "3x3x3: 7 of 44 sampled"]
    assert lines[3] == "… and 5 more sizes (20 of 44 sampled)" and len(lines) == 4
