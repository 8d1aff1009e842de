"""core/units.py: one formatting voice for the CLI and the app."""

from __future__ import annotations

import pytest

from stallscope.core import units


@pytest.mark.parametrize(("us", "text"), [
    (48.0, "48.0 µs"), (999.9, "999.9 µs"), (355_620.0, "355.62 ms"),
    (13_336_320.0, "13.34 s"), (1_289_530.0, "1.29 s"), (-2_500.0, "-2.50 ms")])
def test_a_duration_is_in_the_unit_its_size_calls_for(us, text):
    assert units.duration(us) == text


def test_counts_have_thousands_separators_and_one_is_singular():
    assert units.count(22268) == "22,268"
    assert units.plural(1, "step") == "1 step"
    assert units.plural(0, "step") == "0 steps"
    assert units.plural(22268, "gap") == "22,268 gaps"
    assert units.plural(2, "process", "processes") == "2 processes"


def test_repeats_are_times_never_an_x():
    assert units.times(0) == "0 times"
    assert units.times(1) == "1 time"
    assert units.times(1204) == "1,204 times"
    assert "x" not in units.times(0)


@pytest.mark.parametrize(("ratio", "text"), [
    (2.5, "2.5x faster"), (0.4, "2.5x slower"), (1.002, "as fast"), (37.0, "37.0x faster"),
    (0.0, "no speed measured"), (float("nan"), "no speed measured")])
def test_a_slowdown_is_worded_as_a_slowdown(ratio, text):
    assert units.speedup(ratio) == text
