"""The README's hero image (resources/screenshot.png) is what the app draws today: `make
screenshots` renders it again (resources/make_readme_screenshot.py, the real kineto_nw0 trace)
and this test compares a fresh render with the committed file, with the tolerance of the
reference images (tests/gui/reference_images.py: half size, a pixel differs past PIXEL_TOL)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from fixture_traces import fixture_path
from PIL import Image
from reference_images import PIXEL_TOL, SCALE

pytestmark = pytest.mark.runner  # the app renders in a child process, as `make screenshots`

ROOT = Path(__file__).resolve().parents[2]
HERO = ROOT / "resources" / "screenshot.png"
SCRIPT = ROOT / "resources" / "make_readme_screenshot.py"
SHARE_TOL = 0.01  # a changed figure or two; a band drawn another way moves far more


def half(path: Path) -> np.ndarray:
    image = Image.open(path).convert("RGB")
    size = (round(image.width * SCALE), round(image.height * SCALE))
    return np.asarray(image.resize(size, Image.Resampling.BILINEAR), dtype=np.int16)


def differing_share(a: Path, b: Path) -> float:
    x, y = half(a), half(b)
    assert x.shape == y.shape, f"{a.name}: {x.shape[:2]} vs {b.name}: {y.shape[:2]} (h, w)"
    return float((np.abs(x - y).max(axis=2) > PIXEL_TOL).mean())


def test_the_committed_hero_image_is_what_the_app_draws(tmp_path):
    fixture_path("kineto_nw0")  # the trace the hero shows must be there
    fresh = tmp_path / "hero.png"
    done = subprocess.run([sys.executable, str(SCRIPT), "--source", "fixture", "--out",
                           str(fresh)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    share = differing_share(fresh, HERO)
    assert share <= SHARE_TOL, (
        f"{share:.1%} of resources/screenshot.png differs from what the app draws now (tolerance "
        f"{SHARE_TOL:.0%}): run `make screenshots`, look at it, and commit it; fresh image {fresh}")
