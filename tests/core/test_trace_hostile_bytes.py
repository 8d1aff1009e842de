"""Files whose bytes cannot be a trace are refused early, by what their bytes are (issue 29): a
2 GB sparse `.json` (a JSON head, then NULs), the same as gzip, and a JSON head followed by
hundreds of MB without an event. Each ends in one line and a small peak memory; their times
are in tests/bench/bench_hostile.py (a timed test would depend on the machine's load)."""

from __future__ import annotations

import pytest
from hostile_files import cli_with_peak, repeated_gzip

pytestmark = pytest.mark.runner  # the CLI runs in a child process

MiB, GiB = 2**20, 2**30
HEAD = (b'{"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", '
        b'"pid": 1, "tid": 1, "ts": 0, "dur": 100}, ')
PEAK_LIMIT = 400 * MiB  # the interpreter, numpy and stallscope are ~150 MB of it


def _one_line(rc: int, err: str, path, words: str) -> None:
    assert rc == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert str(path) in err and words in err, err


def test_a_2_gb_sparse_json_is_refused_at_its_first_zero_byte(tmp_path):
    path = tmp_path / "sparse.json"
    with open(path, "wb") as f:
        f.write(HEAD)
        f.truncate(2 * GiB)  # a hole: reads as NULs, takes no disk
    rc, out, err, _seconds, peak = cli_with_peak("analyze", path, timeout=300)
    _one_line(rc, err, path, f"not a trace: a zero byte at byte {len(HEAD):,} (JSON text "
                             "holds none")
    assert peak < PEAK_LIMIT, peak / MiB


def test_gzip_of_a_json_head_and_zeros_is_refused(tmp_path):
    path = tmp_path / "zeros.json.gz"
    repeated_gzip(path, block=b"\0" * (16 * MiB), repeats=64, head=HEAD, level=1)  # 1 GiB
    rc, _, err, _seconds, peak = cli_with_peak("info", path, timeout=300)
    _one_line(rc, err, path, "not a trace: a zero byte at byte")
    assert peak < PEAK_LIMIT, peak / MiB


def test_a_json_head_then_hundreds_of_mb_without_an_event_is_refused(tmp_path):
    path = tmp_path / "no_event.json.gz"
    head = b'{"traceEvents": [], "otherData": {"x": "'
    repeated_gzip(path, block=b"a" * (16 * MiB), repeats=32, head=head, tail=b'"}}', level=1)
    rc, _, err, _seconds, peak = cli_with_peak("info", path, timeout=300)
    _one_line(rc, err, path, 'not a trace: no event (no "ph" key) in its first 128.0 MiB')
    assert peak < 600 * MiB, peak / MiB  # the 128 MiB read, once
