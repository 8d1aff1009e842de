"""Writes stallscope's icons: the app icon (SVG + PNGs 16..256) and the action icons (SVG).

    python resources/icons/make_icons.py

Action icons draw in `currentColor`; gui/theme.py swaps in the theme's text colour when it
renders them. The app icon: three GPU stream lanes of busy blocks, one of them stalled, under
the lens of a scope.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256)

APP_ICON = """\
<svg xmlns="http://www.w3.org/2000/svg" width="256" height="256" viewBox="0 0 256 256">
  <defs>
    <linearGradient id="bg" x1="0" y1="0" x2="0" y2="1">
      <stop offset="0" stop-color="#27364f"/>
      <stop offset="1" stop-color="#141b28"/>
    </linearGradient>
    <linearGradient id="lens" x1="0" y1="0" x2="1" y2="1">
      <stop offset="0" stop-color="#ffb454" stop-opacity="0.30"/>
      <stop offset="1" stop-color="#ff7a1a" stop-opacity="0.12"/>
    </linearGradient>
  </defs>
  <rect x="9" y="9" width="238" height="238" rx="52" fill="url(#bg)" stroke="#3d4f6e"
        stroke-width="3"/>
  <!-- three stream lanes of kernels -->
  <rect x="36" y="58" width="62" height="26" rx="7" fill="#4f8cff"/>
  <rect x="106" y="58" width="38" height="26" rx="7" fill="#4f8cff"/>
  <rect x="152" y="58" width="68" height="26" rx="7" fill="#4f8cff"/>
  <rect x="36" y="101" width="44" height="26" rx="7" fill="#7fb0ff"/>
  <rect x="176" y="101" width="44" height="26" rx="7" fill="#7fb0ff"/>
  <rect x="36" y="144" width="80" height="26" rx="7" fill="#4f8cff"/>
  <rect x="124" y="144" width="30" height="26" rx="7" fill="#4f8cff"/>
  <!-- the stall: an empty stretch of lane two -->
  <path d="M88 114 H168" stroke="#ff9d3b" stroke-width="6" stroke-linecap="round"
        stroke-dasharray="2 12"/>
  <!-- the scope -->
  <circle cx="128" cy="114" r="46" fill="url(#lens)" stroke="#ffb454" stroke-width="12"/>
  <path d="M162 150 L204 194" stroke="#ffb454" stroke-width="20" stroke-linecap="round"/>
</svg>
"""

_ACTION_BODIES = {
    # a folder with a trace wave
    "open": '<path d="M3 7a2 2 0 0 1 2-2h4l2 2h8a2 2 0 0 1 2 2v8a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2z"/>'
    '<path d="M7 14h2l1.5-3 2 5 1.5-2H17"/>',
    # a session: stacked layers (trace, events, line profile)
    "session": '<path d="M12 3 3 7.5 12 12l9-4.5z"/><path d="m3 12 9 4.5 9-4.5"/>'
    '<path d="m3 16.5 9 4.5 9-4.5"/>',
    "run": '<path d="M7 4.5v15a1 1 0 0 0 1.5.86l12-7.5a1 1 0 0 0 0-1.72l-12-7.5'
    'A1 1 0 0 0 7 4.5z"/>',
    "stop": '<rect x="5" y="5" width="14" height="14" rx="2"/>',
    # two traces side by side
    "compare": '<rect x="3" y="4" width="7" height="16" rx="1.5"/>'
    '<rect x="14" y="4" width="7" height="16" rx="1.5"/><path d="M6 9h1M6 13h1M17 9h1M17 15h1"/>',
    "zoom-fit": '<path d="M4 9V5a1 1 0 0 1 1-1h4M15 4h4a1 1 0 0 1 1 1v4M20 15v4a1 1 0 0 1-1 1h-4'
    'M9 20H5a1 1 0 0 1-1-1v-4"/><path d="M8 12h8M8 12l2-2M8 12l2 2M16 12l-2-2M16 12l-2 2"/>',
    "next": '<path d="m9 5 7 7-7 7"/>',
    "prev": '<path d="m15 5-7 7 7 7"/>',
    # a flask: the bundled demo
    "demo": '<path d="M9 3h6M10 3v6L4.5 18.5A1.7 1.7 0 0 0 6 21h12a1.7 1.7 0 0 0 1.5-2.5L14 9V3"/>'
    '<path d="M7.5 15h9"/>',
    # images into a database
    "convert": '<ellipse cx="12" cy="6" rx="7" ry="2.8"/><path d="M5 6v12c0 1.5 3.1 2.8 7 2.8'
    's7-1.3 7-2.8V6"/><path d="M5 12c0 1.5 3.1 2.8 7 2.8s7-1.3 7-2.8"/>',
    "recent": '<circle cx="12" cy="12" r="8.5"/><path d="M12 7.5V12l3 2"/>',
    "trace": '<path d="M14 3H7a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h10a2 2 0 0 0 2-2V8z"/>'
    '<path d="M14 3v5h5"/><path d="M8 15h2l1-2.5 2 4 1-1.5h2"/>',
    "about": '<circle cx="12" cy="12" r="8.5"/><path d="M12 11v5.5"/><path d="M12 7.6v.1"/>',
    "remove": '<path d="m7 7 10 10M17 7 7 17"/>',
}


def action_svg(body: str) -> str:
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="24" height="24" viewBox="0 0 24 24" '
        'fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" '
        f'stroke-linejoin="round">{body}</svg>\n'
    )


def write_svgs(out: Path = HERE) -> list[Path]:
    written = [out / "stallscope.svg"]
    written[0].write_text(APP_ICON, encoding="utf-8")
    for name, body in _ACTION_BODIES.items():
        path = out / f"{name}.svg"
        path.write_text(action_svg(body), encoding="utf-8")
        written.append(path)
    return written


def write_pngs(out: Path = HERE) -> list[Path]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QByteArray, Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    renderer = QSvgRenderer(QByteArray(APP_ICON.encode()))
    written = []
    for size in PNG_SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        path = out / f"stallscope-{size}.png"
        if not image.save(str(path)):
            raise OSError(f"{path}: could not write PNG")
        written.append(path)
    return written


def main() -> int:
    paths = write_svgs() + write_pngs()
    print(f"wrote {len(paths)} icons to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
