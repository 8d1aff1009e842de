"""Before Qt starts: is there a display, and does Qt's xcb plugin find its system libraries?

Qt aborts with a core dump when an xcb library is missing ("xcb-cursor0 or libxcb-cursor0 is
needed") and runs forever, invisibly, without a display; stallscope says so in one line
instead. No Qt import here: this runs before QApplication exists.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Mapping

# What Qt 6's xcb platform plugin loads (ldd libqxcb.so / libQt6XcbQpa.so), and the Debian /
# Ubuntu package of each. README "System libraries" lists the same.
XCB_LIBRARIES = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libX11-xcb.so.1": "libx11-xcb1",
}
HEADLESS_PLATFORMS = ("offscreen", "minimal")


def platform_of(env: Mapping[str, str]) -> str:
    return env.get("QT_QPA_PLATFORM", "").split(":")[0].strip()


def is_headless(env: Mapping[str, str], platform: str = sys.platform) -> bool:
    """No window can show: an offscreen Qt platform, or Linux without DISPLAY/WAYLAND_DISPLAY."""
    if platform_of(env) in HEADLESS_PLATFORMS:
        return True
    return platform.startswith("linux") and not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def uses_xcb(env: Mapping[str, str], platform: str = sys.platform) -> bool:
    qpa = platform_of(env)
    if not platform.startswith("linux"):
        return False
    return qpa == "xcb" or (not qpa and bool(env.get("DISPLAY"))
                            and not env.get("WAYLAND_DISPLAY"))


def missing_xcb_packages(load=ctypes.CDLL) -> list[str]:
    """The packages of the xcb libraries that cannot be loaded, in XCB_LIBRARIES order."""
    missing = []
    for soname, package in XCB_LIBRARIES.items():
        try:
            load(soname)
        except OSError:
            missing.append(package)
    return missing


def xcb_problem(env: Mapping[str, str], platform: str = sys.platform,
                load=ctypes.CDLL) -> str | None:
    """One line naming what to install, or None when Qt's xcb plugin has what it needs."""
    if not uses_xcb(env, platform):
        return None
    missing = missing_xcb_packages(load)
    if not missing:
        return None
    return (f"Qt's xcb platform needs system libraries that are missing: {' '.join(missing)} "
            f"(Debian/Ubuntu: sudo apt-get install {' '.join(missing)})")
