"""Shared test fixtures: the real traces in ../shared/fixtures/traces (see fixture_traces.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_traces import fixture_path, header
from fixture_traces import fixtures_dir as _fixtures_dir


def pytest_report_header(config) -> str:
    return header()


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
    return path
