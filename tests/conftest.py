"""Shared test fixtures: the real traces in ../shared/fixtures/traces (see fixture_traces.py)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest
from fixture_traces import fixture_path, header
from fixture_traces import fixtures_dir as _fixtures_dir
from spawn_watch import Watch

WATCH = pytest.StashKey[Watch]()
pytest_plugins = ["cpu_time"]  # CPU seconds per file at the end of the run


def pytest_report_header(config) -> str:
    return header()


def pytest_configure(config) -> None:
    # A shell without job control starts `make test &` with SIGINT ignored, and an ignored
    # signal stays ignored across exec: every child would then shrug off the Ctrl-C the tests
    # send (tune, the app). A Python handler here is reset to the default in each child.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    item.stash[WATCH] = Watch()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """`make quick` (-m "not runner") promises no child processes: a test that starts one
    without its `runner` mark (set in its file) fails, naming what it started."""
    report = yield
    if call.when == "teardown" and WATCH in item.stash and not item.get_closest_marker("runner"):
        spawned = item.stash[WATCH].spawned()
        if spawned and report.passed:
            report.outcome = "failed"
            report.longrepr = ("started a child process without @pytest.mark.runner (or "
                               "pytestmark = pytest.mark.runner in its file):\n  "
                               + "\n  ".join(spawned[:5]))
    return report


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


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real OpenSSH sshd on 127.0.0.1 (tests/sshd.py) for a module's remote tests."""
    from sshd import Sshd

    sshd = Sshd.start(tmp_path_factory.mktemp("sshd"))
    yield sshd
    sshd.stop()


@pytest.fixture
def host(server, tmp_path, monkeypatch):
    """CLI options for the test host; the remote cache in tmp_path."""
    monkeypatch.setenv("STALLSCOPE_SSH_CONFIG", str(server.config))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return ["--host", server.alias, "--remote-python", sys.executable,
            "--remote-cache", str(tmp_path / "remote-cache")]
