"""Shared test fixtures: the real traces in ../shared/fixtures/traces (see fixture_traces.py)."""

from __future__ import annotations

import inspect
import signal
from pathlib import Path

import pytest
from fixture_traces import fixture_path, header
from fixture_traces import fixtures_dir as _fixtures_dir


def pytest_report_header(config) -> str:
    return header()


def pytest_configure(config) -> None:
    # A shell without job control starts `make test &` with SIGINT ignored, and an ignored
    # signal stays ignored across exec: every child would then shrug off the Ctrl-C the tests
    # send (tune, the app). A Python handler here is reset to the default in each child.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


CHILD_PROCESS_MODULES = frozenset({"subprocess", "multiprocessing", "concurrent",
                                   "runner_helpers", "hostile_files"})


def starts_processes(module) -> bool:
    """A test module that starts child processes (the runner, CLI children, pools, QProcess):
    it imports such a module, or a name from one."""
    for value in vars(module).values():
        home = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", "")
        if str(home).split(".")[0] in CHILD_PROCESS_MODULES:
            return True
        if getattr(value, "__name__", "") == "QProcess":
            return True
    return False


def pytest_collection_modifyitems(config, items):
    """`runner` marks every test of a module that starts child processes, so that
    `pytest -m "not runner"` is the fast loop (`make quick`)."""
    marked: dict[object, bool] = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is None:
            continue
        if module not in marked:
            marked[module] = starts_processes(module)
        if marked[module]:
            item.add_marker(pytest.mark.runner)


@pytest.fixture
def real_trace():
    """real_trace("kineto_nw0") -> Path of that fixture; skips where ../shared is absent
    (fails under CI=true)."""
    return fixture_path


@pytest.fixture
def fixtures_dir() -> Path:
    return _fixtures_dir()


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch) -> Path:
    """Every test keeps its settings, layout and recent list in its own folder."""
    path = tmp_path / "config"
    monkeypatch.setenv("STALLSCOPE_CONFIG_DIR", str(path))
    # Sessions and tune folders default to the user's data folder: a test's own, here.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return path
