"""Where the real traces live: ../shared/fixtures/traces, beside the checkout.

Tests import `fixture_path` (pyproject puts tests/ on pythonpath); a missing folder or file skips
the test with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "traces"


def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"real traces not found at {FIXTURES} (../shared/fixtures/traces is absent)")
    return FIXTURES


def fixture_path(prefix: str) -> Path:
    """The fixture whose file name starts with `prefix`."""
    found = sorted(fixtures_dir().glob(prefix + "*"))
    if not found:
        pytest.skip(f"real trace {prefix}* not found in {FIXTURES}")
    return found[0]
