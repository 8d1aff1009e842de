"""Benchmark: start-up budgets (issue 34), each a cold process, run by hand.

    .venv/bin/python tests/bench/bench_startup.py [--repeat 5] [--only NAME ...]

For each case: min and median of the child's CPU time (user + sys, from wait4: the steadier
figure on a shared machine) and of its wall time, over --repeat cold runs, alternating cases.
    cli --version, cli --help          goal 0.15 s
    cli analyze 10 MB                  goal 0.6 s   (hta_sampled_rank-0 tiled to ~11 MB, JSON)
    app window                         goal 1 s     (the app's first painted window: the splash)
    app main window                    (for reference: the main window's first paint)
    app 30 MB picture                  goal 2 s     (`stallscope --screenshot` of kineto_nw4,
                                                     30 MB of JSON in its .gz, to the PNG)
    app 30 MB picture + exit           (for reference: the same run to the process's end)
The two "app" window cases run gui/app.main as a user's launch does (no PATH, a display), on
Qt's offscreen platform with the display checks answered yes, and exit at the first paint.
Bytecode is cached as an installed package's is (PYTHONPYCACHEPREFIX in a temporary folder, so
the checkout stays clean, even where PYTHONDONTWRITEBYTECODE is set); one untimed round of every
case fills it first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
FIXTURES = HERE.parents[2].parent / "shared" / "fixtures" / "traces"
CLI = [sys.executable, "-m", "stallscope.core.cli"]


def _first_paint(which: str) -> None:
    """In a child: gui/app.main as launched on a desktop; exit at the first paint of `which`
    ("any" top-level window, or the "main" window)."""
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QApplication

    from stallscope.gui import app as app_module

    class Painted(QObject):
        def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
            if event.type() == QEvent.Type.Paint and obj.isWidgetType() and obj.isWindow() \
                    and (which == "any" or type(obj).__name__ == "MainWindow"):
                os._exit(0)
            return False

    app_module.is_headless = lambda _env: False
    app_module.xcb_problem = lambda _env: None
    qapp = QApplication(sys.argv[:1])
    painted = Painted()
    qapp.installEventFilter(painted)
    sys.exit(app_module.main([]))


def _first_picture(path: str, out: str) -> None:
    """In a child: `stallscope --screenshot OUT PATH`, ended as soon as the PNG is written
    (the interpreter's teardown is no part of the first picture)."""
    from stallscope.gui import app as app_module

    shoot = app_module.screenshot

    def then_exit(*args, **kwargs) -> int:
        rc = shoot(*args, **kwargs)
        sys.stdout.flush()
        os._exit(rc)

    app_module.screenshot = then_exit
    sys.exit(app_module.main(["--screenshot", out, path]))


def timed(argv: list[str], env: dict | None = None) -> tuple[float, float]:
    """(wall s, CPU s) of a fresh process; exits with its stderr when it fails."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{argv[1:]} failed: {err}")
    return wall, usage.ru_utime + usage.ru_stime


def make_10mb(folder: Path) -> Path:
    out = folder / "tiled_10mb.json"
    subprocess.run([sys.executable, str(HERE.parent / "bench_load.py"), "--tile-only", str(out),
                    "--size-mb", "10", "--fixture", "hta_sampled_rank-0"], check=True,
                   stdout=subprocess.DEVNULL)
    return out


def cases(folder: Path) -> dict[str, tuple[list[str], float]]:
    """name -> (argv, goal in CPU seconds)."""
    big = next(FIXTURES.glob("kineto_nw4_worker0.1623212756351*"))
    app_env = dict(os.environ, XDG_CONFIG_HOME=str(folder / "cfg"),
                   XDG_DATA_HOME=str(folder / "data"), STALLSCOPE_CONFIG_DIR=str(folder / "cfg"))
    os.environ.update(app_env)  # the app cases read and write no user settings
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    return {
        "cli --version": ([*CLI, "--version"], 0.15),
        "cli --help": ([*CLI, "--help"], 0.15),
        "cli analyze 10 MB": ([*CLI, "analyze", "--json", str(make_10mb(folder))], 0.6),
        "app window": ([sys.executable, str(HERE), "--first-paint", "any"], 1.0),
        "app main window": ([sys.executable, str(HERE), "--first-paint", "main"], float("nan")),
        "app 30 MB picture": ([sys.executable, str(HERE), "--first-picture", str(big),
                               str(folder / "shot.png")], 2.0),
        "app 30 MB picture + exit": ([sys.executable, "-m", "stallscope.gui.app", "--screenshot",
                                      str(folder / "shot.png"), str(big)], float("nan")),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="*", help="case names (substrings) to run")
    ap.add_argument("--first-paint", choices=("any", "main"), help=argparse.SUPPRESS)
    ap.add_argument("--first-picture", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.first_paint:
        return _first_paint(args.first_paint)
    if args.first_picture:
        return _first_picture(*args.first_picture)
    with tempfile.TemporaryDirectory() as tmp:
        todo = {k: v for k, v in cases(Path(tmp)).items()
                if not args.only or any(o in k for o in args.only)}
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in todo}
        for argv, _goal in todo.values():  # fills the bytecode cache
            timed(argv)
        for _ in range(args.repeat):
            for name, (argv, _goal) in todo.items():
                runs[name].append(timed(argv))
    print(f"load average {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores, "
          f"{args.repeat} cold runs each")
    print(f"{'case':<25} {'CPU min':>8} {'CPU med':>8} {'wall min':>9} {'wall med':>9}  goal")
    for name, (_argv, goal) in todo.items():
        wall = [r[0] for r in runs[name]]
        cpu = [r[1] for r in runs[name]]
        verdict = "" if goal != goal else ("ok" if statistics.median(cpu) <= goal else "OVER")
        print(f"{name:<25} {min(cpu):8.2f} {statistics.median(cpu):8.2f} {min(wall):9.2f} "
              f"{statistics.median(wall):9.2f}  {'' if goal != goal else f'{goal:.2f} s CPU'} "
              f"{verdict}")


if __name__ == "__main__":
    main()
