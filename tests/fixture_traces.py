"""Where the real traces live: ../shared/fixtures/traces, beside the checkout
(STALLSCOPE_FIXTURES overrides it).

Tests import `fixture_path` (pyproject puts tests/ on pythonpath). A missing folder or file skips
the test with the reason on a plain clone; under CI (CI=true) it fails the test instead, so a CI
run without the traces cannot pass by skipping what it was meant to check.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

DEFAULT = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "traces"
FIXTURES = Path(os.environ.get("STALLSCOPE_FIXTURES") or DEFAULT)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing(reason: str):
    """Skip (a plain clone) or fail (CI=true) the calling test."""
    if in_ci():
        pytest.fail(f"{reason}; CI=true needs the real traces", pytrace=False)
    pytest.skip(reason)


def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        missing(f"real traces not found at {FIXTURES} (../shared/fixtures/traces is absent)")
    return FIXTURES


def fixture_path(prefix: str) -> Path:
    """The fixture whose file name starts with `prefix`."""
    found = sorted(fixtures_dir().glob(prefix + "*"))
    if not found:
        missing(f"real trace {prefix}* not found in {FIXTURES}")
    return found[0]


@functools.cache
def analyzed(prefix: str):
    """analyze(load(fixture_path(prefix))), computed once per test process (xdist worker) and
    shared: only for tests that read the Report and never change it."""
    from stallscope.core.analysis import analyze
    from stallscope.core.trace import load

    return analyze(load(fixture_path(prefix)))


def header() -> str:
    """One line for pytest's header: where the traces are, or what their absence does."""
    if FIXTURES.is_dir():
        count = sum(1 for p in FIXTURES.iterdir() if not p.name.startswith("."))
        return f"real traces: {FIXTURES} ({count} files)"
    then = "tests that need them FAIL (CI=true)" if in_ci() else "tests that need them skip"
    return f"real traces: absent at {FIXTURES}; {then}"
