"""Terminal escapes: names from a trace (its file name, op names, annotations, device and thread
names) never reach the terminal raw; every command's output goes through one choke point."""

from __future__ import annotations

import json

import pytest
from hostile_files import cli_with_peak

from stallscope.core.commands.terminal import escape, escape_write

pytestmark = pytest.mark.runner  # the CLI in a child process (hostile_files.cli_with_peak)

EVIL = "x\x1b]0;pwned\x07\x1b[2J\x1b[8mhid\u202egnp.exe\u200b\x9b"
RAW = ("\x1b", "\x07", "\u202e", "\u200b", "\x9b")


def test_escape_writes_controls_as_codes_and_keeps_newlines_and_tabs():
    assert escape(EVIL + "\n\tok") == ("x\\x1b]0;pwned\\x07\\x1b[2J\\x1b[8mhid\\u202egnp.exe"
                                       "\\u200b\\x9b\n\tok")
    assert escape("a\rb") == "a\\x0db"        # a carriage return could hide what came before
    assert escape_write("\ranalysed 3/8") == "\ranalysed 3/8"  # a progress line redraws
    assert escape("ünïcode · ok") == "ünïcode · ok"


def test_a_hostile_trace_is_printed_escaped(tmp_path):
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0, "dur": 1000},
        {"ph": "X", "cat": "user_annotation", "name": EVIL, "pid": 1, "tid": 1, "ts": 5,
         "dur": 900},
        {"ph": "X", "cat": "cpu_op", "name": "aten::" + EVIL, "pid": 1, "tid": 1, "ts": 10,
         "dur": 600},
        {"ph": "X", "cat": "kernel", "name": EVIL, "pid": 0, "tid": 7, "ts": 15, "dur": 30,
         "args": {"device": 0, "stream": 7}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": EVIL}},
    ]
    doc = {"traceEvents": events,
           "deviceProperties": [{"id": 0, "name": EVIL, "totalGlobalMem": 1 << 34}]}
    path = tmp_path / f"{EVIL}.json"
    path.write_text(json.dumps(doc))
    for command in (("info", path), ("analyze", path), ("analyze", tmp_path)):
        rc, out, err, _, _ = cli_with_peak(*command)
        assert rc == 0, err
        for raw in RAW:
            assert raw not in out and raw not in err, (command, raw)
        assert "x\\x1b]0;pwned\\x07" in out  # the name is there, written out


def test_errors_naming_a_hostile_file_are_escaped(tmp_path):
    path = tmp_path / f"{EVIL}.json"
    path.write_text("not json")
    rc, out, err, _, _ = cli_with_peak("info", path)
    assert rc == 2 and err.count("\n") == 1
    assert not any(raw in err for raw in RAW)
    assert "x\\x1b]0;pwned\\x07\\x1b[2J" in err
