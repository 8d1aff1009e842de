"""The timeline's graphics items: ONE item per lane, painting rectangles straight from numpy.

Rendering follows Tracy: each layer of a lane keeps a small level-of-detail pyramid (the
intervals with gaps below g, 4g, 16g, ... merged, built once); a paint picks the level just under
3 px, takes the visible slice with `np.searchsorted` and merges what is closer than 3 px. A paint
therefore draws O(width in pixels) rectangles whatever the number of events. Merged blocks are
drawn paler the less of them the intervals really cover (prefix sums, O(log n) per block), so a
zoomed-out lane that is 57% busy does not look 100% busy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QRectF, Qt
from PySide6.QtGui import QBrush, QFont, QFontMetrics, QPainter, QPen

from stallscope.core import intervals as iv
from stallscope.gui.colors import TEXT_COLOR, qcolor

MERGE_PX = 3.0
DENSITY_LEVELS = 5
MIN_TEXT_PX = 40


def merge_close(starts: np.ndarray, ends: np.ndarray, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """Merge consecutive sorted, non-overlapping intervals separated by less than `gap`."""
    if len(starts) < 2 or gap <= 0:
        return starts, ends
    keep = (starts[1:] - ends[:-1]) >= gap
    first = np.empty(int(keep.sum()) + 1, dtype=np.int64)
    first[0] = 0
    first[1:] = np.flatnonzero(keep) + 1
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = len(starts) - 1
    return starts[first], ends[last]


class IntervalPyramid:
    """Level-of-detail copies of one layer: level k has every gap below base * 4**k merged."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        union = iv.union(iv.as_intervals(np.asarray(starts, np.float64),
                                         np.asarray(ends, np.float64)))
        self.starts, self.ends = union[:, 0].copy(), union[:, 1].copy()
        lengths = self.ends - self.starts
        self._before = np.concatenate([[0.0], np.cumsum(lengths)])  # covered length up to i
        self.levels: list[tuple[float, np.ndarray, np.ndarray]] = [(0.0, self.starts, self.ends)]
        if len(self.starts) > 256:
            span = float(self.ends[-1] - self.starts[0])
            gap = span / 4_000_000.0
            s, e = self.starts, self.ends
            while len(s) > 256 and gap < span:
                s, e = merge_close(s, e, gap)
                self.levels.append((gap, s, e))
                gap *= 4.0

    def __len__(self) -> int:
        return len(self.starts)

    def visible(self, lo: float, hi: float, merge: float) -> tuple[np.ndarray, np.ndarray]:
        """Intervals overlapping [lo, hi], gaps below `merge` closed."""
        level = 0
        for i, (gap, _, _) in enumerate(self.levels):
            if gap <= merge:
                level = i
        _, s, e = self.levels[level]
        i0 = int(np.searchsorted(e, lo, "left"))
        i1 = int(np.searchsorted(s, hi, "right"))
        return merge_close(s[i0:i1], e[i0:i1], merge)

    def covered_upto(self, x: np.ndarray) -> np.ndarray:
        """Covered length up to each x (prefix sums: O(log n) per point)."""
        if not len(self.starts):
            return np.zeros(np.shape(x))
        i = np.searchsorted(self.starts, x, side="right") - 1
        j = np.maximum(i, 0)
        inside = np.clip(x - self.starts[j], 0.0, self.ends[j] - self.starts[j])
        return np.where(i >= 0, self._before[j] + inside, 0.0)

    def density(self, s: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Fraction of each [s, e] the original intervals cover (1 for unmerged ones)."""
        width = e - s
        if not len(self.starts):
            return np.ones_like(width)
        covered = self.covered_upto(e) - self.covered_upto(s)
        return np.divide(covered, width, out=np.ones_like(width), where=width > 0)


def dominant_runs(pyramids: list[IntervalPyramid], lo: float, hi: float, bin_ms: float):
    """Per pixel column of [lo, hi] (bins of `bin_ms`), the layer covering most of it and how
    much of the pixel is covered at all (level 1..DENSITY_LEVELS); neighbouring pixels alike
    merge into runs. Returns (starts, ends, layer index, level) of the runs.

    For a band of disjoint pieces in several colours (idle causes): honest at overview (7,000
    tiny queued-work gaps do not paint a wide block over the data-loading time around them),
    exact to the pixel when zoomed in, O(pixels x layers) whatever the number of pieces."""
    empty = (np.zeros(0), np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
    n = int(np.ceil((hi - lo) / bin_ms)) + 2 if bin_ms > 0 else 0
    if n <= 0 or n > 100_000 or not pyramids:
        return empty
    edges = lo - bin_ms + np.arange(n + 1) * bin_ms
    cover = np.stack([np.diff(p.covered_upto(edges)) for p in pyramids])
    best = np.argmax(cover, axis=0)
    total = np.minimum(cover.sum(axis=0) / bin_ms, 1.0)
    level = np.clip(np.ceil(total * DENSITY_LEVELS - 1e-9).astype(np.int64), 0, DENSITY_LEVELS)
    code = np.where(level > 0, best * (DENSITY_LEVELS + 1) + level, -1)
    change = np.flatnonzero(np.diff(code)) + 1
    first = np.concatenate([[0], change])
    last = np.concatenate([change, [n]])
    keep = code[first] >= 0
    first, last = first[keep], last[keep]
    return edges[first], edges[last], best[first], level[first]


class Layer:
    """One colour inside a lane: a pyramid of intervals drawn in a band of the row."""

    def __init__(self, key: str, starts, ends, color: str, top: float = 0.1,
                 height: float = 0.8, dominant: bool = False) -> None:
        self.key = key
        self.color = color
        self.pyramid = IntervalPyramid(starts, ends)
        # Blocks are paler the less of them is covered, never fainter than 35% (a lone
        # sub-pixel event must still show).
        self.brushes = [QBrush(qcolor(color, round(255 * (0.35 + 0.65 * (k + 1)
                                                         / DENSITY_LEVELS))))
                        for k in range(DENSITY_LEVELS)]
        # Dominant layers share a band (disjoint pieces, one colour each, e.g. idle causes):
        # each pixel shows the one that covers most of it (see LaneItem._paint_dominant).
        self.dominant = dominant
        self.top = top
        self.height = height


class LaneItem(pg.GraphicsObject):
    """ONE graphics item per lane, painting its layers from numpy arrays."""

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
        self.texts = texts  # (starts, ends, names), drawn where they fit
        self.text_pen = QPen(qcolor(text_color))
        self._describe = describe
        self.last_drawn: dict[str, int] = {}
        lo = min((float(ly.pyramid.starts[0]) for ly in self.layers if len(ly.pyramid)),
                 default=0.0)
        hi = max((float(ly.pyramid.ends[-1]) for ly in self.layers if len(ly.pyramid)),
                 default=1.0)
        self._bounds = QRectF(lo, self.y, max(hi - lo, 1e-9), self.h)
        self.setFlag(self.GraphicsItemFlag.ItemUsesExtendedStyleOption, True)

    def layer(self, key: str) -> Layer:
        return next(ly for ly in self.layers if ly.key == key)

    def describe(self, x_ms: float) -> str | None:
        return self._describe(x_ms) if self._describe is not None else None

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        return self._bounds

    def viewRangeChanged(self) -> None:  # noqa: N802 - pyqtgraph hook
        self.update()

    def paint(self, painter: QPainter, option, widget=None) -> None:
        px_per_ms = abs(painter.transform().m11())
        if px_per_ms <= 0:
            return
        view = self.viewRect()
        lo, hi = (view.left(), view.right()) if view is not None else (
            self._bounds.left(), self._bounds.right())
        merge = MERGE_PX / px_per_ms
        min_w = 1.0 / px_per_ms
        painter.setPen(Qt.PenStyle.NoPen)
        dominant = [ly for ly in self.layers if ly.dominant]
        if dominant:
            self._paint_dominant(painter, dominant, lo, hi, px_per_ms)
        for layer in self.layers:
            if layer.dominant:
                continue
            s, e = layer.pyramid.visible(lo, hi, merge)
            self.last_drawn[layer.key] = len(s)
            if not len(s):
                continue
            s = np.maximum(s, lo - min_w)
            w = np.maximum(np.minimum(e, hi + min_w) - s, min_w)
            top, height = self.y + layer.top * self.h, layer.height * self.h
            level = np.ceil(layer.pyramid.density(s, s + w) * DENSITY_LEVELS).astype(np.int64)
            level = np.clip(level, 1, DENSITY_LEVELS) - 1
            for k in np.unique(level).tolist():
                pick = level == k
                painter.setBrush(layer.brushes[k])
                painter.drawRects([QRectF(x, top, ww, height) for x, ww in
                                   zip(s[pick].tolist(), w[pick].tolist(), strict=True)])
        if self.texts is not None:
            self._paint_texts(painter, lo, hi, px_per_ms)

    def _paint_dominant(self, painter: QPainter, layers: list[Layer], lo: float, hi: float,
                        px_per_ms: float) -> None:
        """One band of disjoint coloured pieces: see dominant_runs."""
        starts, ends, which, level = dominant_runs([ly.pyramid for ly in layers], lo, hi,
                                                   1.0 / px_per_ms)
        top, height = self.y + layers[0].top * self.h, layers[0].height * self.h
        for k, layer in enumerate(layers):
            self.last_drawn[layer.key] = int((which == k).sum())
        for value in np.unique(which * (DENSITY_LEVELS + 1) + level).tolist():
            k, lvl = divmod(value, DENSITY_LEVELS + 1)
            pick = (which == k) & (level == lvl)
            painter.setBrush(layers[k].brushes[lvl - 1])
            painter.drawRects([QRectF(a, top, b - a, height) for a, b in
                               zip(starts[pick].tolist(), ends[pick].tolist(), strict=True)])

    def _paint_texts(self, painter: QPainter, lo: float, hi: float, px_per_ms: float) -> None:
        """Names centred in their interval when they fit (never per-event items)."""
        starts, ends, names = self.texts
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
        for i in wide.tolist():
            x0, x1 = max(starts[i], lo), min(ends[i], hi)
            rect = transform.mapRect(QRectF(x0, self.y, x1 - x0, self.h))
            text = metrics.elidedText(names[i], Qt.TextElideMode.ElideRight,
                                      int(rect.width()) - 6)
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
