"""The timeline's graphics items: ONE item per lane, painting its bands as one image per paint.

A band is a stack of layers (disjoint intervals, one colour each: the GPU's busy time, its idle
causes, the main thread's states). Each paint cuts the visible range into device-pixel columns
and gives every layer a height in each column proportional to the share of that column's time it
covers (prefix sums over the intervals, `np.searchsorted`: O(columns x layers) whatever the number
of events). Painted area is therefore time at every zoom: a column 13% busy is 13% filled, 7,000
tiny gaps inside busy stretches make thin slivers at overview and whole columns zoomed in.
Sub-pixel rounding is carried from column to column, so each layer's painted pixels add up to
its time. The stack is one indexed image, drawn with one call; no per-event graphics items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter, QPen

from stallscope.core import intervals as iv
from stallscope.gui.colors import TEXT_COLOR, qcolor

MIN_TEXT_PX = 40
MAX_COLUMNS = 20_000


class Coverage:
    """A layer's intervals as a disjoint sorted set with prefix sums of the covered length."""

    def __init__(self, starts, ends) -> None:
        self.set = iv.union(iv.as_intervals(np.asarray(starts, np.float64),
                                            np.asarray(ends, np.float64)))
        self._before = iv.lengths_before(self.set)

    @property
    def starts(self) -> np.ndarray:
        return self.set[:, 0]

    @property
    def ends(self) -> np.ndarray:
        return self.set[:, 1]

    def __len__(self) -> int:
        return len(self.set)

    def covered_upto(self, x: np.ndarray) -> np.ndarray:
        """Covered length up to each x (O(log n) per point)."""
        return iv.covered_upto(self.set, x, self._before)


def column_shares(coverages: Sequence[Coverage], edges: np.ndarray) -> np.ndarray:
    """(layers, columns): the share of each column [edges[i], edges[i+1]] each layer covers."""
    width = np.diff(edges)
    covered = np.stack([np.diff(c.covered_upto(edges)) for c in coverages])
    return np.divide(covered, width, out=np.zeros_like(covered), where=width > 0)


def stack_rows(shares: np.ndarray, rows: int) -> np.ndarray:
    """(layers + 1, columns) integer boundaries of the stacked layers, in pixel rows from the
    band's anchor: layer k fills rows [b[k], b[k + 1]) of each column.

    A layer's height is its exact height rounded with the remainder carried to the next column,
    so its painted pixels over a run of columns add up to its time (a 0.3 px sliver in every
    column paints every third one); a layer with no time in a column gets no pixel there. Each
    column is then settled to its rounded total (a whole idle column is whole), by the layers
    rounded furthest from their exact height."""
    exact = shares * rows
    heights = np.diff(np.rint(np.cumsum(exact, axis=1)), axis=1, prepend=0.0)
    heights = np.where(exact > 0, np.maximum(heights, 0.0), 0.0)
    target = np.clip(np.rint(exact.sum(axis=0)), 0, rows)
    cols = np.arange(shares.shape[1])
    for _ in range(shares.shape[0]):
        short = target - heights.sum(axis=0)
        if not short.any():
            break
        error = exact - heights  # > 0: painted short of its time
        grow = np.argmax(np.where(exact > 0, error, -np.inf), axis=0)
        shrink = np.argmin(np.where(heights > 0, error, np.inf), axis=0)
        up, down = short > 0, short < 0
        heights[grow[up], cols[up]] += 1
        heights[shrink[down], cols[down]] -= 1
    bounds = np.cumsum(heights, axis=0).astype(np.int32)
    return np.vstack([np.zeros((1, shares.shape[1]), np.int32), bounds])


def band_pixels(bounds: np.ndarray, rows: int, from_top: bool) -> np.ndarray:
    """(rows, columns) uint8: each pixel the index of the layer whose rows hold it, the number
    of layers above the stack (transparent)."""
    layers, columns = bounds.shape[0] - 1, bounds.shape[1]
    runs = np.vstack([np.diff(bounds, axis=0), rows - bounds[-1:]])  # (layers + 1, columns)
    which = np.repeat(np.tile(np.arange(layers + 1, dtype=np.uint8), columns), runs.T.ravel())
    image = which.reshape(columns, rows).T
    return np.ascontiguousarray(image if from_top else image[::-1])


def fitted(name: str, metrics: QFontMetrics, room: int) -> str:
    """`name` where it fits; else its number part ("ProfilerStep#10" -> "#10", what tells
    steps apart); else elided."""
    if metrics.horizontalAdvance(name) <= room:
        return name
    if "#" in name:
        name = name[name.rindex("#"):]
    return metrics.elidedText(name, Qt.TextElideMode.ElideRight, room)


def fitted_all(names: Sequence[str], metrics: QFontMetrics, rooms: Sequence[int]) -> list[str]:
    """Each name fitted to its room; once one "ProfilerStep#N" must show its number alone,
    every such name in the row does: steps of a little different length read alike ("#1011"
    beside "#1012", not beside "ProfilerStep#1012")."""
    shown = [fitted(name, metrics, room) for name, room in zip(names, rooms, strict=True)]
    if any("#" in name and text != name for name, text in zip(names, shown, strict=True)):
        shown = [fitted(name[name.rindex("#"):], metrics, room) if "#" in name else text
                 for name, text, room in zip(names, shown, rooms, strict=True)]
    return shown


class Layer:
    """One colour of a band: its intervals and where the band sits in the row."""

    def __init__(self, key: str, starts, ends, color: str, top: float = 0.1,
                 height: float = 0.8, from_top: bool = False) -> None:
        self.key = key
        self.color = color
        self.coverage = Coverage(starts, ends)
        self.top = top
        self.height = height
        self.from_top = from_top  # the stack hangs from the band's top edge (else rises)

    @property
    def band(self) -> tuple[float, float, bool]:
        return (self.top, self.height, self.from_top)

    def rgba(self) -> int:
        return QColor(self.color).rgba()


class LaneItem(pg.GraphicsObject):
    """ONE graphics item per lane, painting its bands from numpy arrays."""

    def __init__(self, row: int, label: str, layers: Sequence[Layer], kind: str,
                 describe: Callable[[float], str | None] | None = None,
                 texts: tuple[np.ndarray, np.ndarray, Sequence[str]] | None = None,
                 text_color: str = TEXT_COLOR, key: str = "", y: float | None = None,
                 height: float = 1.0) -> None:
        super().__init__()
        self.row = row
        self.y = float(row) if y is None else y  # top of the row, in lane units
        self.h = height
        self.label = label
        self.kind = kind
        self.key = key
        self.layers = list(layers)
        self.bands: dict[tuple, list[Layer]] = {}
        for layer in self.layers:  # layers sharing a place in the row stack, in list order
            self.bands.setdefault(layer.band, []).append(layer)
        self.texts = texts  # (starts, ends, names), drawn where they fit
        self.text_pen = QPen(qcolor(text_color))
        self._describe = describe
        self.last_drawn: dict[str, int] = {}  # columns each layer painted at the last paint
        lo = min((float(ly.coverage.starts[0]) for ly in self.layers if len(ly.coverage)),
                 default=0.0)
        hi = max((float(ly.coverage.ends[-1]) for ly in self.layers if len(ly.coverage)),
                 default=1.0)
        self._bounds = QRectF(lo, self.y, max(hi - lo, 1e-9), self.h)
        self.setFlag(self.GraphicsItemFlag.ItemUsesExtendedStyleOption, True)

    def layer(self, key: str) -> Layer:
        return next(ly for ly in self.layers if ly.key == key)

    def move_to(self, row: int, y: float) -> None:
        """Another place in the timeline (rows added or removed above it); the data stays."""
        self.prepareGeometryChange()
        self.row, self.y = row, float(y)
        self._bounds = QRectF(self._bounds.left(), self.y, self._bounds.width(), self.h)

    def restyle(self, colors: dict[str, str], text_color: str) -> None:
        """New colours (a theme change): `colors` by layer key, for the layers it names. Each
        paint builds its colour table from the layers, so nothing else is recomputed."""
        for layer in self.layers:
            layer.color = colors.get(layer.key, layer.color)
        self.text_pen = QPen(qcolor(text_color))
        self.update()

    def describe(self, x_ms: float) -> str | None:
        return self._describe(x_ms) if self._describe is not None else None

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        return self._bounds

    def viewRangeChanged(self) -> None:  # noqa: N802 - pyqtgraph hook
        self.update()

    def paint(self, painter: QPainter, option, widget=None) -> None:
        t = painter.transform()
        px_per_ms = t.m11()
        if px_per_ms <= 0:
            return
        view = self.viewRect()
        lo, hi = (view.left(), view.right()) if view is not None else (
            self._bounds.left(), self._bounds.right())
        lo, hi = max(lo, self._bounds.left()), min(hi, self._bounds.right())
        if hi > lo:
            x0, x1 = t.map(QPointF(lo, 0)).x(), t.map(QPointF(hi, 0)).x()
            first, last = int(np.floor(x0)), int(np.ceil(x1))
            if 0 < last - first <= MAX_COLUMNS:
                columns = np.arange(first, last + 1, dtype=np.float64)
                edges = (columns - t.dx()) / t.m11()
                painter.save()
                painter.resetTransform()
                for (top, height, from_top), layers in self.bands.items():
                    self._paint_band(painter, t, layers, edges, first, top, height, from_top)
                painter.restore()
        if self.texts is not None:
            self._paint_texts(painter, self.texts, lo, hi, px_per_ms)

    def _paint_band(self, painter: QPainter, t, layers: list[Layer], edges: np.ndarray,
                    first: int, top: float, height: float, from_top: bool) -> None:
        """One stack of layers, one image: see the module's docstring."""
        y0 = t.map(QPointF(0, self.y + top * self.h)).y()
        y1 = t.map(QPointF(0, self.y + (top + height) * self.h)).y()
        r0, r1 = round(min(y0, y1)), round(max(y0, y1))
        rows = r1 - r0
        if rows <= 0:
            return
        bounds = stack_rows(column_shares([ly.coverage for ly in layers], edges), rows)
        filled = np.diff(bounds, axis=0) > 0
        for k, layer in enumerate(layers):
            self.last_drawn[layer.key] = int(filled[k].sum())
        if not filled.any():
            return
        pixels = band_pixels(bounds, rows, from_top)
        height_px, width_px = pixels.shape
        image = QImage(pixels.data, width_px, height_px, width_px, QImage.Format.Format_Indexed8)
        image.setColorTable([ly.rgba() for ly in layers] + [0])  # the last: transparent
        painter.drawImage(QPointF(first, r0), image)

    def _paint_texts(self, painter: QPainter, texts: tuple[np.ndarray, np.ndarray, Sequence[str]],
                     lo: float, hi: float, px_per_ms: float) -> None:
        """Names centred in their interval when they fit (never per-event items)."""
        starts, ends, names = texts
        i0 = int(np.searchsorted(ends, lo, "left"))
        i1 = int(np.searchsorted(starts, hi, "right"))
        if i1 <= i0:
            return
        wide = np.flatnonzero((np.minimum(ends[i0:i1], hi) - np.maximum(starts[i0:i1], lo))
                              * px_per_ms >= MIN_TEXT_PX)[:400] + i0
        if not len(wide):
            return
        font = QFont(painter.font())
        font.setPointSizeF(8.5)
        metrics = QFontMetrics(font)
        transform = painter.transform()
        painter.save()
        painter.resetTransform()
        painter.setFont(font)
        painter.setPen(self.text_pen)
        rects = [transform.mapRect(QRectF(max(starts[i], lo), self.y,
                                          min(ends[i], hi) - max(starts[i], lo), self.h))
                 for i in wide.tolist()]
        shown = fitted_all([names[i] for i in wide.tolist()], metrics,
                           [int(rect.width()) - 6 for rect in rects])
        for rect, text in zip(rects, shown, strict=True):
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()


class StepEdges(pg.GraphicsObject):
    """Thin vertical lines at step boundaries, across all lanes; only the visible ones, and none
    when they would be closer than a few pixels (then they only add noise)."""

    MIN_PX = 6.0

    def __init__(self, edges_ms: np.ndarray, rows: float, color: str) -> None:
        super().__init__()
        self.edges = np.asarray(edges_ms, dtype=np.float64)
        self.rows = rows
        self.pen = QPen(qcolor(color, 150))
        self.pen.setCosmetic(True)
        self.pen.setStyle(Qt.PenStyle.DashLine)
        lo = float(self.edges[0]) if len(self.edges) else 0.0
        hi = float(self.edges[-1]) if len(self.edges) else 1.0
        self._bounds = QRectF(lo, 0, max(hi - lo, 1e-9), rows)
        self.drawn = 0

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        return self._bounds

    def viewRangeChanged(self) -> None:  # noqa: N802 - pyqtgraph hook
        self.update()

    def paint(self, painter: QPainter, option, widget=None) -> None:
        px_per_ms = abs(painter.transform().m11())
        view = self.viewRect()
        if px_per_ms <= 0 or view is None:
            return
        i0 = int(np.searchsorted(self.edges, view.left(), "left"))
        i1 = int(np.searchsorted(self.edges, view.right(), "right"))
        shown = self.edges[i0:i1]
        self.drawn = 0
        if not len(shown) or view.width() * px_per_ms / len(shown) < self.MIN_PX:
            return
        painter.setPen(self.pen)
        painter.drawLines([QLineF(x, 0.0, x, float(self.rows)) for x in shown.tolist()])
        self.drawn = len(shown)
