"""Where the suite's CPU goes: each test's CPU seconds (its own process and every child it
waited for), summed per file at the end of the run, most first.

Wall durations (`--durations`) swing with the machine's load; CPU seconds hardly do, so this
is the figure to cut when the suite is slow. Under pytest-xdist each worker measures its own
tests and the figure travels to the controller in the report's user_properties.
"""

from __future__ import annotations

import os
from collections import defaultdict

import pytest

KEY = "cpu_s"
SHOWN = int(os.environ.get("STALLSCOPE_CPU_SHOWN", "15"))  # files listed at the end


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_START] = _cpu()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "teardown" and _START in item.stash:
        report.user_properties.append((KEY, _cpu() - item.stash[_START]))
    return report


_START = pytest.StashKey[float]()
_by_file: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report) -> None:
    for key, value in report.user_properties:
        if key == KEY and report.when == "teardown":
            _by_file[report.nodeid.split("::")[0]] += value


def pytest_terminal_summary(terminalreporter) -> None:
    if not _by_file:
        return
    total = sum(_by_file.values())
    title = f"CPU seconds by file (tests and their children): {total:.0f} s"
    terminalreporter.write_sep("=", title)
    for path, seconds in sorted(_by_file.items(), key=lambda kv: -kv[1])[:SHOWN]:
        terminalreporter.write_line(f"{seconds:8.1f}s  {seconds / total:5.1%}  {path}")
