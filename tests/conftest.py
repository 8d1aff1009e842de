"""Shared test fixtures: where the real traces live (../shared/fixtures/traces)."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "traces"


def _find(prefix: str) -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"real traces not found at {FIXTURES} (../shared/fixtures/traces is absent)")
    matches = sorted(FIXTURES.glob(prefix + "*"))
    if not matches:
        pytest.skip(f"fixture {prefix}* not found in {FIXTURES}")
    return matches[0]


@pytest.fixture
def real_trace():
    """real_trace("kineto_nw0") -> Path of that fixture; skips where ../shared is absent."""
    return _find


@pytest.fixture
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"real traces not found at {FIXTURES} (../shared/fixtures/traces is absent)")
    return FIXTURES
