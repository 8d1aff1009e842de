"""Hostile files: each ends in exit 2 and one line naming the file (or loads with a note), without
reading a device, blocking on a FIFO, blowing the memory budget or printing a traceback."""

from __future__ import annotations

import json
import os
import time
import warnings

import pytest
from hostile_files import cli_with_peak, deep_args_trace, repeated_gzip, step_events

from stallscope.core import readers
from stallscope.core.errors import TraceError
from stallscope.core.trace import load

pytestmark = pytest.mark.runner  # the CLI runs in a child process

MiB = 2**20


def _one_line_error(rc, err, path, message):
    assert rc == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert str(path) in err and message in err, err


# ----------------------------------------------------------------------------- file kinds

@pytest.mark.parametrize("make, kind", [
    (lambda d: (d / "zero.json").symlink_to("/dev/zero") or d / "zero.json",
     "is a character device"),
    (lambda d: (d / "urandom.json.gz").symlink_to("/dev/urandom") or d / "urandom.json.gz",
     "is a character device"),
    (lambda d: os.mkfifo(d / "pipe.json") or d / "pipe.json", "is a FIFO"),
])
@pytest.mark.parametrize("command", ["analyze", "info"])
def test_non_regular_files_are_refused_by_kind_without_reading(tmp_path, make, kind, command):
    path = make(tmp_path)
    rc, _, err, seconds, _ = cli_with_peak(command, path)
    _one_line_error(rc, err, path, kind)
    assert seconds < 30  # a FIFO was not opened for a blocking read


def test_a_device_given_directly_is_refused(tmp_path):
    with pytest.raises(TraceError, match=r"^/dev/null: is a character device"):
        load("/dev/null")


# ----------------------------------------------------------------------------- nesting

@pytest.mark.parametrize("name, content", [
    ("deep_args.json", deep_args_trace(100_000)),
    ("brackets.json", b"[" * 1_000_000),
    ("unclosed.json", b'{"traceEvents": [{"args": ' + b'{"a": ' * 200_000),
])
def test_deep_nesting_is_one_line(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    rc, _, err, seconds, _ = cli_with_peak("analyze", path)
    _one_line_error(rc, err, path, "JSON nested deeper than about 1,000 levels")
    with pytest.raises(TraceError, match="nested deeper"):
        load(path)


def test_nesting_a_trace_can_have_still_loads(tmp_path):
    path = tmp_path / "nested.json"
    path.write_bytes(deep_args_trace(200))
    t = load(path)
    assert [t.names[i] for i in t.name] == ["ProfilerStep#1", "x"]


# ----------------------------------------------------------------------------- metadata

@pytest.mark.parametrize("extra, note", [
    ({"deviceProperties": "A100"}, "deviceProperties ignored (a JSON string, not a list)"),
    ({"deviceProperties": [{"id": 0, "name": "A100"}, 5, "x"]},
     "2 deviceProperties entries ignored (not an object)"),
    ({"distributedInfo": "rank 0"}, "distributedInfo ignored (a JSON string, not an object)"),
    ({"distributedInfo": [0, 8]}, "distributedInfo ignored (a JSON array, not an object)"),
])
def test_metadata_that_does_not_parse_is_ignored_with_a_note(tmp_path, extra, note):
    path = tmp_path / "meta.pt.trace.json"
    path.write_text(json.dumps({**extra, "traceEvents": step_events()}))
    t = load(path)
    assert t.n_events == 3 and t.gpu_devices() == [0]
    assert t.notes == [note]
    if isinstance(extra.get("deviceProperties"), list):
        assert t.device_properties == [{"id": 0, "name": "A100"}]
    rc, out, err, _, _ = cli_with_peak("info", path)
    assert rc == 0 and err == "" and f"note       {note}" in out


def test_metadata_after_the_events_is_read(tmp_path):
    path = tmp_path / "late.json"
    path.write_text(json.dumps({"traceEvents": step_events(),
                                "distributedInfo": {"rank": 3, "world_size": 8},
                                "deviceProperties": [{"id": 0, "name": "A100"}]}))
    t = load(path)
    assert (t.rank, t.world_size) == (3, 8) and t.device_properties == [{"id": 0, "name": "A100"}]
    assert t.notes == []


# ----------------------------------------------------------------------------- numbers

def test_huge_floats_are_dropped_without_a_numpy_warning(tmp_path):
    path = tmp_path / "floats.json"
    events = step_events() + [
        {"ph": "X", "cat": "cpu_op", "name": "huge", "pid": 1, "tid": 1, "ts": 1e308,
         "dur": 1e308},
        {"ph": "X", "cat": "cpu_op", "name": "far", "pid": 1, "tid": 1, "ts": -1e308, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "long", "pid": 1, "tid": 1, "ts": 5, "dur": 1e300},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 50, "dur": 1,
         "args": {"device": 10**30, "stream": 1e308, "correlation": -(10**40)}},
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 20,
         "args": {"Device Type": 10**30, "Device Id": 0, "Bytes": 1e308,
                  "Total Allocated": 1e308}},
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = load(path)
    assert t.dropped == {"ts/dur beyond 2^53 µs (not a time)": 3,
                         "[memory] event with bad ts/Bytes": 1}
    names = [t.names[i] for i in t.name]
    assert names == ["ProfilerStep#1", "aten::mm", "gemm", "k"]
    k = names.index("k")  # an id out of range is no id; the kernel's pid names its device
    assert (t.device[k], t.stream[k], t.corr[k]) == (0, -1, -1)
    rc, out, err, _, _ = cli_with_peak("analyze", path, "--json",
                              python_flags=("-W", "error::RuntimeWarning"))
    assert rc == 0 and err == "", err
    assert json.loads(out)["window_us"] == [0.0, 100.0]


# ----------------------------------------------------------------------------- messages

def test_not_json_names_the_start_as_text(tmp_path):
    path = tmp_path / "hello.json"
    path.write_bytes(b"hello world\n")
    rc, _, err, _, _ = cli_with_peak("analyze", path)
    _one_line_error(rc, err, path, 'not JSON (starts with "hello world")')
    assert "b'" not in err
    binary = tmp_path / "noise.json"
    binary.write_bytes(bytes(range(256)) * 4)
    rc, _, err, _, _ = cli_with_peak("analyze", binary)
    _one_line_error(rc, err, binary, "not JSON (starts with binary data)")


def test_shown_head_is_one_readable_line():
    assert readers.shown(b"ab\ncd\t\x01ef" + b"x" * 40) == '"ab cd ef' + "x" * 15 + '..."'


def test_memory_error_is_a_one_line_trace_error(tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": step_events()}))

    def oom(*args, **kwargs):
        raise MemoryError
        yield  # a job

    monkeypatch.setattr(readers, "decode", oom)
    with pytest.raises(TraceError, match=r"t\.json: ran out of memory while loading \(budget "):
        load(path)


# ----------------------------------------------------------------------------- gzip bombs

HEAD = b'{"traceEvents": [' + json.dumps(step_events()[0]).encode() + b", "


def test_gzip_whose_trailer_lies_stops_at_the_budget(tmp_path):
    """512 MiB of blanks inside the event list; the trailer claims 1 MiB; the budget is 16 MiB:
    it stops after about 10 MiB, names both sizes, and never holds the 512 MiB."""
    path = tmp_path / "bomb.json.gz"
    repeated_gzip(path, b" " * MiB, 512, head=HEAD, tail=b"]}", trailer_size=MiB)
    assert path.stat().st_size < 2 * MiB
    rc, _, err, seconds, rss = cli_with_peak("analyze", path, budget=16 * MiB)
    _one_line_error(rc, err, path, "too large for the memory available: over 10.0 MiB of JSON "
                                   "once unzipped (its gzip trailer says 1.0 MiB)")
    assert "the budget of 16.0 MiB (STALLSCOPE_MEMORY_LIMIT, else the free memory) holds 10.0 MiB" \
        in err
    assert rss < 200 * MiB and seconds < 30


def test_multi_member_gzip_stops_at_the_budget(tmp_path):
    path = tmp_path / "members.json.gz"
    repeated_gzip(path, b" " * MiB, 256, head=HEAD, tail=b"]}", members=64)
    rc, _, err, _, rss = cli_with_peak("analyze", path, budget=16 * MiB)
    _one_line_error(rc, err, path, "over 10.0 MiB of JSON once unzipped")
    assert rss < 200 * MiB


def test_gzip_of_blanks_is_refused_after_the_first_megabytes(tmp_path):
    path = tmp_path / "blank.json.gz"
    repeated_gzip(path, b" " * MiB, 1024)  # 1 GiB of spaces, no JSON at all
    rc, _, err, seconds, rss = cli_with_peak("analyze", path)
    _one_line_error(rc, err, path, "not a trace: more than 16.0 MiB of blank space and no JSON")
    assert rss < 200 * MiB


def test_gzip_of_something_else_is_refused_before_it_is_unzipped(tmp_path, monkeypatch):
    path = tmp_path / "text.json.gz"
    repeated_gzip(path, b"lorem ipsum " * 100_000, 2000)  # 2.3 GB of text
    monkeypatch.setenv("STALLSCOPE_MEMORY_LIMIT", str(2**30))  # its trailer says too much
    t = time.perf_counter()
    with pytest.raises(TraceError, match=r'not JSON \(starts with "lorem ipsum'):
        load(path)
    assert time.perf_counter() - t < 10  # one chunk read, not 2.3 GB


def test_gigabytes_of_blanks_inside_the_json_stop_at_the_first_16_mib(tmp_path):
    """Whatever the budget (here the machine's free memory): no trace holds 16 MiB of blanks."""
    path = tmp_path / "blanks.json.gz"
    repeated_gzip(path, b" " * MiB, 2048, head=HEAD, tail=b"]}")  # 2 GiB of spaces
    rc, _, err, seconds, rss = cli_with_peak("analyze", path)
    _one_line_error(rc, err, path, "not a trace: more than 16.0 MiB of blank space in a row at "
                                   "byte ")
    assert rss < 200 * MiB and seconds < 30


def test_gzip_trailer_beyond_the_budget_is_refused_after_the_first_chunk(tmp_path, monkeypatch):
    path = tmp_path / "claims.json.gz"
    event = json.dumps(step_events()[1]).encode() + b", "
    size = repeated_gzip(path, event * 10_000, 30, head=HEAD, tail=json.dumps(step_events()[1])
                         .encode() + b"]}")  # 24 MiB of events
    monkeypatch.setenv("STALLSCOPE_MEMORY_LIMIT", str(16 * MiB))
    with pytest.raises(TraceError, match=rf"{size / MiB:.1f} MiB of JSON by its gzip trailer; "
                                         r"the budget of 16.0 MiB .* holds 10.0 MiB of JSON"):
        load(path)


def test_truthful_multi_member_gzip_loads(tmp_path):
    path = tmp_path / "ok.json.gz"
    body = json.dumps(step_events())[1:-1].encode()
    repeated_gzip(path, b" ", 3, head=b'{"traceEvents": [' + body, tail=b"]}", members=3)
    assert load(path).n_events == 3


def test_corrupt_gzip_is_one_line(tmp_path):
    path = tmp_path / "bad.json.gz"
    data = bytearray(repeated_gzip_bytes(tmp_path))
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError, match=r"bad\.json\.gz: (not a valid gzip file|not JSON)"):
        load(path)


def repeated_gzip_bytes(tmp_path) -> bytes:
    p = tmp_path / "src.json.gz"
    body = json.dumps(step_events() * 200)[1:-1].encode()
    repeated_gzip(p, b" ", 1, head=b'{"traceEvents": [' + body, tail=b"]}")
    return p.read_bytes()


def test_bad_budget_variable_is_one_line(tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": step_events()}))
    monkeypatch.setenv("STALLSCOPE_MEMORY_LIMIT", "lots")
    with pytest.raises(TraceError, match="STALLSCOPE_MEMORY_LIMIT=lots: not a number of bytes"):
        load(path)


# ----------------------------------------------------------------------------- encodings, gzip junk

def _trace_text() -> str:
    return json.dumps({"traceEvents": step_events()})


def test_a_utf8_bom_is_read_past(tmp_path):
    import gzip

    plain = tmp_path / "bom.json"
    plain.write_bytes(b"\xef\xbb\xbf" + _trace_text().encode())
    zipped = tmp_path / "bom.json.gz"
    zipped.write_bytes(gzip.compress(b"\xef\xbb\xbf  " + _trace_text().encode()))
    for path in (plain, zipped):
        trace = load(path)
        assert trace.n_events == 3 and not trace.notes


@pytest.mark.parametrize("encoding, name", [
    ("utf-16", "UTF-16"), ("utf-16-le", "UTF-16LE"), ("utf-16-be", "UTF-16BE"),
    ("utf-32", "UTF-32"), ("utf-32-le", "UTF-32LE"), ("utf-32-be", "UTF-32BE")])
def test_wide_text_is_named_with_a_command_that_fixes_it(tmp_path, encoding, name):
    import shlex
    import shutil
    import subprocess

    path = tmp_path / f"{encoding}.json"
    path.write_bytes(_trace_text().encode(encoding))
    rc, _, err, _, _ = cli_with_peak("info", path)
    _one_line_error(rc, err, path, f"{name} text; stallscope reads UTF-8: save it as UTF-8 "
                    f"(e.g. iconv -f {name} -t UTF-8 IN > OUT)")
    if shutil.which("iconv") is None:
        pytest.skip("no iconv here to run the command the message gives")
    command = err.split("(e.g. ")[1].rsplit(")", 1)[0]
    fixed = tmp_path / "fixed.json"
    command = command.replace("IN", shlex.quote(str(path))).replace("OUT", shlex.quote(str(fixed)))
    subprocess.run(command, shell=True, check=True)
    assert load(fixed).n_events == 3  # the command the message gives does not mangle it


def test_junk_after_gzip_is_ignored_and_said(tmp_path):
    import gzip

    path = tmp_path / "junk.json.gz"
    text = _trace_text().encode()
    half = len(text) // 2
    path.write_bytes(gzip.compress(text[:half]) + gzip.compress(text[half:]) + b"not gzip\n")
    trace = load(path)
    assert trace.n_events == 3  # both members read
    assert trace.notes == ['9 bytes after the gzip data ignored (not gzip: starts with '
                           '"not gzip")']
    rc, out, err, _, _ = cli_with_peak("info", path)
    assert rc == 0, err
    assert "9 bytes after the gzip data ignored" in out
