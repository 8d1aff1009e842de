"""While a trace loads, a big block freed is reused without page faults (readers/heap.py); before
and after, glibc hands such a block back to the kernel as it always did."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from stallscope.core.readers import heap
from stallscope.core.readers.heap import reusing_freed_memory


def _glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False


def _faults_reusing_a_freed_block() -> int:
    """Minor page faults of a 48 MiB block filled right after a 64 MiB one was freed (a block
    above it keeps it from being the heap's top, as the columns do while a trace loads)."""
    big = bytearray(64 << 20)
    pin = bytearray(1 << 20)
    del big
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    again = bytearray(48 << 20)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del again, pin
    return faults


_IN_A_FRESH_PROCESS = """
import resource
from stallscope.core.readers.heap import reusing_freed_memory

def faults():  # as _faults_reusing_a_freed_block
    big = bytearray(64 << 20)
    pin = bytearray(1 << 20)
    del big
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    again = bytearray(48 << 20)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

outside = faults()
with reusing_freed_memory():
    inside = faults()
print(outside, inside, faults(), resource.getpagesize())
"""


@pytest.mark.runner  # a fresh process: a long-lived heap has holes that take any block
@pytest.mark.skipif(not _glibc(), reason="glibc's mallopt only")
def test_freed_pages_are_reused_while_loading_and_only_then():
    out = subprocess.run([sys.executable, "-c", _IN_A_FRESH_PROCESS], capture_output=True,
                         text=True, timeout=120, check=True)
    outside, inside, after, page = map(int, out.stdout.split())
    pages = (48 << 20) // page
    assert outside > pages // 2  # glibc: mmap, munmap, mmap again
    assert inside < pages // 20  # the freed block's pages, reused
    assert after > pages // 2  # 48 MiB is over the 32 MiB the threshold goes back to


def test_elsewhere_it_does_nothing(monkeypatch):
    monkeypatch.setattr(heap, "_libc", False)
    with reusing_freed_memory():
        block = bytearray(1 << 20)
    assert len(block) == 1 << 20


def test_a_load_leaves_big_blocks_to_mmap_again(tmp_path):
    """The threshold goes back to 32 MiB after a load, even one that fails."""
    from stallscope.core.errors import TraceError
    from stallscope.core.trace import load

    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1}')
    with pytest.raises(TraceError):
        load(bad)
    if _glibc():
        assert _faults_reusing_a_freed_block() > ((48 << 20) // resource.getpagesize()) // 2
