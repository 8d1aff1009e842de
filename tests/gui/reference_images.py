"""Approved images, pyqtgraph style: a view is rendered, compared with its approved PNG in
tests/gui/reference/ within a tolerance, and on a mismatch the new image (and a diff) is saved
beside it for review.

    STALLSCOPE_APPROVE=1 .venv/bin/python -m pytest tests/gui/test_reference_images.py
        re-approves: writes every reference anew (look at them before committing)

Images are stored at half size in 256 colours (max coverage, no dithering): small files, and a
one-pixel shift of antialiased text does not count. A pixel differs when one of its channels
moves by more than PIXEL_TOL; a view fails when more than SHARE_TOL of its pixels differ:
enough for a changed digit or two, far less than a lane in another colour, a moved panel or a
missing chart.

A blank or clipped view fails before any comparison: `assert_drawn` wants a share of pixels
away from the page colour, `clipped_labels` finds labels and buttons cut short.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QTextDocument, QTextOption
from PySide6.QtGui import Qt as QtText  # mightBeRichText
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QWidget

REFERENCE = Path(__file__).resolve().parent / "reference"
APPROVE = os.environ.get("STALLSCOPE_APPROVE", "") == "1"
SCALE = 0.5
PIXEL_TOL = 40
SHARE_TOL = 0.004


def render(widget: QWidget) -> QImage:
    QApplication.processEvents()
    return widget.grab().toImage()


def stored(image: QImage) -> Image.Image:
    """What a reference holds: half size, 256 colours, no dithering (deterministic)."""
    small = image.scaled(round(image.width() * SCALE), round(image.height() * SCALE),
                         Qt.AspectRatioMode.IgnoreAspectRatio,
                         Qt.TransformationMode.SmoothTransformation)
    return quantized(small)


def quantized(image: QImage) -> Image.Image:
    """256 colours by maximum coverage (no channel off by more than a few), no dithering:
    UI colours stay true, even of a small chip; files stay small."""
    return Image.fromarray(pixels(image)).quantize(
        256, method=Image.Quantize.MAXCOVERAGE, dither=Image.Dither.NONE)


def pixels(image: QImage) -> np.ndarray:
    rgb = image.convertToFormat(QImage.Format.Format_RGB888)
    width, height = rgb.width(), rgb.height()
    data = np.frombuffer(rgb.constBits(), dtype=np.uint8, count=rgb.sizeInBytes())
    # a copy: the buffer belongs to `rgb`, which is gone once this returns
    return data.reshape(height, rgb.bytesPerLine())[:, : 3 * width].reshape(
        height, width, 3).copy()


def content_share(image: QImage) -> float:
    """Share of pixels away (by more than 24 in a channel) from the most common colour."""
    px = pixels(image).astype(np.int16)
    flat = px.reshape(-1, 3)
    colours, counts = np.unique(flat[:: max(len(flat) // 20_000, 1)], axis=0,
                                return_counts=True)
    background = colours[np.argmax(counts)]
    return float((np.abs(px - background).max(axis=2) > 24).mean())


def assert_drawn(image: QImage, min_share: float, name: str) -> None:
    share = content_share(image)
    assert share >= min_share, (f"{name}: only {share:.1%} of the pixels are drawn (want "
                                f"{min_share:.0%}): a blank or half-drawn view")


def clipped_labels(root: QWidget) -> list[str]:
    """Visible labels and buttons whose text does not fit: one line each, what and how."""
    out = []
    for w in root.findChildren(QWidget):
        if not w.isVisibleTo(root) or w.width() <= 1 or w.height() <= 1:
            continue
        if isinstance(w, QLabel):
            text = w.text()
            if not text.strip() or w.pixmap() is not None and not w.pixmap().isNull():
                continue
            if hasattr(w, "is_elided"):  # ElidedLabel: ends in "…" with a tooltip, by design
                continue
            if w.wordWrap():
                need = w.heightForWidth(w.width())
                widest = widest_line(w)
                if need > w.height() + 3:
                    out.append(f"{w.objectName() or type(w).__name__} {text[:50]!r}: "
                               f"needs {need}px of height, has {w.height()}")
                elif widest > w.contentsRect().width() + 3:
                    out.append(f"{w.objectName() or type(w).__name__} {text[:50]!r}: a word "
                               f"needs {widest:.0f}px of width, has {w.contentsRect().width()}")
            elif w.sizeHint().width() > w.width() + 3:
                out.append(f"{w.objectName() or type(w).__name__} {text[:50]!r}: needs "
                           f"{w.sizeHint().width()}px of width, has {w.width()}")
        elif isinstance(w, QAbstractButton) and w.text().strip():
            if w.fontMetrics().horizontalAdvance(w.text().replace("&", "")) > w.width():
                out.append(f"button {w.text()!r}: {w.width()}px wide")
    return out


def widest_line(label: QLabel) -> float:
    """The widest line of a wrapping label as QLabel lays it out (breaks between words only):
    wider than the label when one word does not fit, which QLabel then cuts off."""
    doc = QTextDocument()
    doc.setDefaultFont(label.font())
    doc.setDocumentMargin(0)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WordWrap)
    doc.setDefaultTextOption(option)
    rich = label.textFormat() == Qt.TextFormat.RichText or (
        label.textFormat() == Qt.TextFormat.AutoText and QtText.mightBeRichText(label.text()))
    if rich:
        doc.setHtml(label.text())
    else:
        doc.setPlainText(label.text())
    doc.setTextWidth(max(label.contentsRect().width(), 1))
    return doc.idealWidth()


def check_image(name: str, image: QImage, min_share: float = 0.1) -> None:
    """Compare `image` with tests/gui/reference/<name>.png (see the module's docstring)."""
    assert_drawn(image, min_share, name)
    new = stored(image)
    path = REFERENCE / f"{name}.png"
    REFERENCE.mkdir(parents=True, exist_ok=True)
    if APPROVE:
        new.save(path, optimize=True)
        return
    fresh = path.with_suffix(".new.png")
    if not path.exists():
        new.save(fresh, optimize=True)
        raise AssertionError(f"{path} has no approved image yet; look at {fresh}, then approve "
                             "it with STALLSCOPE_APPROVE=1")
    a = np.asarray(new.convert("RGB"), dtype=np.int16)
    b = np.asarray(Image.open(path).convert("RGB"), dtype=np.int16)
    if a.shape != b.shape:
        new.save(fresh)
        raise AssertionError(f"{name}: size {a.shape[1]}x{a.shape[0]} vs approved "
                             f"{b.shape[1]}x{b.shape[0]}; new image at {fresh}")
    differ = np.abs(a - b).max(axis=2) > PIXEL_TOL
    share = float(differ.mean())
    if share > SHARE_TOL:
        new.save(fresh)
        diff = np.where(differ[..., None], np.array([255, 0, 255], np.uint8),
                        (b // 3 + 170).astype(np.uint8))
        Image.fromarray(diff).save(path.with_suffix(".diff.png"))
        raise AssertionError(
            f"{name}: {share:.2%} of the pixels differ from the approved image (tolerance "
            f"{SHARE_TOL:.1%}); new image {fresh}, differences in magenta "
            f"{path.with_suffix('.diff.png')}; if the change is wanted: STALLSCOPE_APPROVE=1")
    for stale in (fresh, path.with_suffix(".diff.png")):
        stale.unlink(missing_ok=True)
