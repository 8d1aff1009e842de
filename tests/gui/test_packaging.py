"""The packaged app: PyInstaller builds it from packaging/stallscope.spec, and the built binary
starts offscreen, opens a real trace given on its command line and writes a screenshot."""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from fixture_traces import fixture_path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "packaging" / "stallscope.spec"


def test_desktop_file_and_spec_name_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    desktop = configparser.ConfigParser(interpolation=None)
    desktop.optionxform = str
    desktop.read(ROOT / "packaging" / "stallscope.desktop")
    entry = desktop["Desktop Entry"]
    assert entry["Type"] == "Application"
    assert entry["Name"] == project["name"]
    assert entry["Exec"].split()[0] == project["name"]
    assert entry["Icon"] == project["name"]
    assert entry["Categories"].endswith(";")
    spec = SPEC.read_text()
    assert 'PROJECT["name"]' in spec and 'PROJECT["version"]' in spec
    assert '"torch"' in spec  # excluded: scripts run in the user's interpreter
    assert os.access(ROOT / "packaging" / "build.sh", os.X_OK)


def _pyinstaller() -> None:
    try:
        import PyInstaller  # noqa: F401
    except ImportError:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "pyinstaller>=6"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"pyinstaller cannot be installed here: {done.stderr.strip()[-300:]}")


@pytest.mark.slow
@pytest.mark.packaging
@pytest.mark.runner  # PyInstaller, then the built app, in child processes
@pytest.mark.timeout(1800)  # the build alone may take 900 s on a loaded machine
def test_built_app_starts_and_opens_a_trace(tmp_path):
    traces = [fixture_path("kineto_nw0")]
    _pyinstaller()

    started = time.monotonic()
    build = subprocess.run(
        [sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
         "--distpath", str(tmp_path / "dist"), "--workpath", str(tmp_path / "work"), str(SPEC)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    build_s = time.monotonic() - started
    assert build.returncode == 0, build.stderr[-3000:]
    name = "stallscope.exe" if os.name == "nt" else "stallscope"
    binary = tmp_path / "dist" / "stallscope" / name
    assert binary.exists()
    # scripts are run by path in the user's interpreter: the runner must ship as source
    internal = binary.parent / "_internal" / "stallscope"
    assert (internal / "core" / "capture" / "runner.py").is_file()
    assert (internal / "resources" / "demo" / "train_demo.py").is_file()
    print(f"PyInstaller build: {build_s:.0f} s")

    out = tmp_path / "shot.png"
    config = tmp_path / "config"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", STALLSCOPE_CONFIG_DIR=str(config))
    env.pop("PYTHONPATH", None)  # the bundle must stand on its own
    run = subprocess.run([str(binary), "--screenshot", str(out), str(traces[0])],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"stdout: {run.stdout[-2000:]}\nstderr: {run.stderr[-2000:]}"
    assert "Traceback" not in run.stderr, run.stderr[-2000:]

    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    with Image.open(out) as image:
        width, height = image.size
        assert width >= 640 and height >= 400
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200, "screenshot is (nearly) blank"

    # --screenshot leaves the user's settings alone: no recent list, no layout, no theme
    written = sorted(p.name for p in config.rglob("*")) if config.exists() else []
    assert written == [], f"--screenshot wrote {written}"
