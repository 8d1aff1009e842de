"""`stallscope [PATH] [--compare PATH2] [--screenshot OUT.png] [--demo]`: the desktop app.

With --screenshot the window is rendered offscreen to OUT.png once PATH (and PATH2) are
loaded, and the program exits: 0 on success, 2 with one line on stderr on bad input.

Without a display (`make run` over ssh, in CI): --demo runs the demo headless and writes a
screenshot of its analysis (the path is printed); anything else says there is no display and
exits 2. With a display, missing system libraries of Qt's xcb plugin are named in one line
instead of Qt's abort. Qt's "propagateSizeHints" warning is filtered out of stderr.
Ctrl-C in the terminal closes the window as File > Quit does and exits with 130.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

from stallscope.core import __version__
from stallscope.core.commands.terminal import escape
from stallscope.gui import pyside_workaround
from stallscope.gui.platform_check import is_headless, xcb_problem

DEFAULT_SIZE = (1400, 900)
MAX_SIDE = 16384
INTERRUPTED = 130  # the exit status of a program ended by Ctrl-C (128 + SIGINT)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stallscope", description="Why is my GPU waiting? Open a torch.profiler trace.")
    parser.add_argument("path", nargs="?", help="trace file, TensorBoard log dir, session or "
                                                "folder of ranks' traces")
    parser.add_argument("--compare", metavar="PATH2", help="a second trace to compare (after)")
    parser.add_argument("--screenshot", metavar="OUT.png",
                        help="render the window offscreen to OUT.png and exit")
    parser.add_argument("--size", default=f"{DEFAULT_SIZE[0]}x{DEFAULT_SIZE[1]}",
                        help="window size for --screenshot, WxH (default %(default)s)")
    parser.add_argument("--demo", action="store_true", help="run the bundled demo")
    parser.add_argument("--version", action="version", version=f"stallscope {__version__}")
    return parser


def _fail(message: str) -> int:
    print(f"stallscope: error: {escape(message)}", file=sys.stderr)  # names files: no raw ESC
    return 2


def _size(text: str, minimum: tuple[int, int] = (1, 1)) -> tuple[int, int]:
    """WxH, at least the window's `minimum` (Qt would silently make it that big)."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise SystemExit(_fail(f"--size {text}: expected WxH, e.g. 1400x900")) from None
    if w < minimum[0] or h < minimum[1]:
        raise SystemExit(_fail(f"--size {text}: smaller than the window can be, at least "
                               f"{minimum[0]}x{minimum[1]}"))
    if w > MAX_SIDE or h > MAX_SIDE:
        raise SystemExit(_fail(f"--size {text}: larger than {MAX_SIDE}x{MAX_SIDE}"))
    return w, h


def quit_on_interrupt(app, window) -> None:
    """Ctrl-C in the app's terminal closes the window (its jobs cancelled, its layout saved,
    as File > Quit does) and ends the event loop with INTERRUPTED. Python runs a signal
    handler only when it gets control back, so a timer hands it control while Qt waits."""
    from PySide6.QtCore import QTimer

    def interrupted(_signum, _frame) -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a second Ctrl-C ends it at once
        window.close()
        app.exit(INTERRUPTED)

    signal.signal(signal.SIGINT, interrupted)
    timer = QTimer(app)
    timer.timeout.connect(lambda: None)
    timer.start(200)


QUIET_QT_MESSAGES = ("propagateSizeHints",)  # the offscreen plugin's note on every window


def _qt_message(_mode, _context, message: str) -> None:
    if not any(quiet in message for quiet in QUIET_QT_MESSAGES):
        print(escape(message), file=sys.stderr)


def install_message_filter() -> None:
    from PySide6.QtCore import qInstallMessageHandler

    qInstallMessageHandler(_qt_message)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    headless_demo = False
    if args.screenshot:
        if not args.path:
            return _fail("--screenshot needs a PATH to open")
        for p in (args.path, args.compare):
            if p and not Path(p).exists():
                return _fail(f"{p}: no such file or folder")
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    elif is_headless(os.environ):
        if not args.demo:
            return _fail("no display (DISPLAY and WAYLAND_DISPLAY are unset): nothing can "
                         "show; use --screenshot OUT.png PATH, or --demo for a screenshot of "
                         "the demo's analysis")
        headless_demo = True
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    else:
        problem = xcb_problem(os.environ)
        if problem:
            return _fail(problem)

    install_message_filter()
    from PySide6.QtWidgets import QApplication

    app = cast(QApplication, QApplication.instance() or QApplication(sys.argv[:1]))
    from stallscope.gui.widgets import install_plain_text_guard

    install_plain_text_guard(app)  # names from traces never render as rich text
    app.setApplicationName("stallscope")
    app.setOrganizationName("stallscope")
    try:
        from stallscope.gui import theme

        theme.apply_theme(app, "light" if args.screenshot or headless_demo
                          else theme.saved_mode(), plots=False)
        QApplication.setWindowIcon(theme.app_icon())
    except (ImportError, AttributeError):
        pass

    splash = None
    if not (args.screenshot or headless_demo):  # a window at once, before the heavy imports
        from stallscope.gui.splash import Splash

        splash = Splash(__version__)
        splash.show()
        splash.step("Starting: loading the analysis views…")
    from stallscope.gui import theme
    from stallscope.gui.main_window import MainWindow

    # both import pyqtgraph (after the splash has painted); before any worker thread exists
    pyside_workaround.collect_on_gui_thread()
    theme.apply_plot_colors()
    if splash is not None:
        splash.step("Starting: building the window…")
    # a screenshot leaves no trace in the user's settings: no layout, no recent items
    window = MainWindow(persist=not (args.screenshot or headless_demo))
    minimum = window.minimumSizeHint()
    size = _size(args.size, (minimum.width(), minimum.height()))
    if args.screenshot:
        return screenshot(window, args.path, args.compare, args.screenshot, size)
    if headless_demo:
        return run_demo_headless(window, size)
    quit_on_interrupt(app, window)
    window.show()
    if splash is not None:
        splash.finish(window)
    if args.path:
        window.open_path(args.path)
        if args.compare:
            window.sig_document_shown.connect(lambda _doc: window.open_compare(args.compare))
    elif args.demo:
        window.run_demo()
    return app.exec()


def screenshot(window, path: str, compare: str | None, out: str,
               size: tuple[int, int] = DEFAULT_SIZE) -> int:
    """Load, render the window to `out`, return an exit code (2 on any error)."""
    errors: list[str] = []
    window.controller.sig_load_failed.connect(lambda _role, msg: errors.append(msg))
    window.resize(*size)
    window.show()
    window.open_path(path)
    for target in (path, compare):
        if target is None:
            continue
        if target is compare:
            window.open_compare(target)
        if not window.wait_for_load() or errors:
            window.close()
            window.deleteLater()
            return _fail(errors[0] if errors else f"{target}: loading timed out")
    from PySide6.QtWidgets import QApplication

    QApplication.processEvents()
    saved = window.grab().save(out)
    window.close()
    window.deleteLater()  # tear down the scene now, not during interpreter shutdown
    QApplication.processEvents()
    return 0 if saved else _fail(f"{out}: cannot write the PNG")


def run_demo_headless(window, size: tuple[int, int] = DEFAULT_SIZE) -> int:
    """No display: run the bundled demo under the profiler (the CLI runner, its output on this
    terminal), then write a screenshot of its analysis and print where it is."""
    from stallscope.gui.dialogs.run import DEMO_SCRIPT, demo_request

    request = demo_request()
    session = Path(request.session_root) / time.strftime("demo-%Y%m%d-%H%M%S")
    print(f"stallscope: no display: running the demo headless into {session}", flush=True)
    cmd = [sys.executable, "-m", "stallscope.core.cli", "run", "--session", str(session),
           "--no-analyze", "--cwd", str(DEMO_SCRIPT.parent), "--", str(DEMO_SCRIPT)]
    runner = subprocess.Popen(cmd)
    try:
        rc = runner.wait()
    except KeyboardInterrupt:  # the runner got the Ctrl-C too: let it write its last record
        try:
            runner.wait(timeout=30)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            runner.kill()
            runner.wait()
        print(f"stallscope: interrupted (the demo's session: {session})", file=sys.stderr)
        return INTERRUPTED
    if rc != 0:
        return _fail(f"the demo run failed (its session: {session})")
    out = session / "stallscope-demo.png"
    rc = screenshot(window, str(session), None, str(out), size)
    if rc == 0:
        print(f"stallscope: the demo's analysis: {out}")
        print(f"stallscope: on a desktop, open it with: stallscope {session}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
