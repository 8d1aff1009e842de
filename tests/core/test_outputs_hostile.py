"""What stallscope writes is valid by construction, whatever it read (issue 29): the Perfetto
export splices into the TOP-LEVEL traceEvents list (a first "traceEvents" key nested in otherData
is not it), and JUnit XML holds no character XML 1.0 forbids, file names decoded with
replacement."""

from __future__ import annotations

import io
import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hostile_files import step_events

from stallscope.core import cli
from stallscope.core.errors import StallscopeError
from stallscope.core.render.perfetto import PID, _splice

SESSION = Path(__file__).parent / "steady_sessions" / "io-2workers"


def test_perfetto_export_adds_to_the_top_level_list_not_a_nested_one(tmp_path, capsys):
    decoy = [{"ph": "i", "name": "decoy", "pid": 9, "tid": 9, "ts": 1}]
    text = ('{"otherData": {"note": "\\"traceEvents\\": [", "traceEvents": '
            + json.dumps(decoy) + '}, "trace\\u0045vents": ' + json.dumps(step_events()) + "}")
    src = tmp_path / "nested.json"
    src.write_text(text)
    assert text.index('"traceEvents"') < text.index("trace\\u0045vents")  # the decoy first
    out = tmp_path / "annotated.json"
    assert cli.main(["export", str(src), "--perfetto", str(out)]) == 0
    doc = json.loads(out.read_text())  # valid JSON
    assert doc["otherData"]["traceEvents"] == decoy  # the nested list untouched
    ours = [e for e in doc["traceEvents"] if e.get("pid") == PID]
    assert len(ours) > 4 and doc["traceEvents"][len(ours):] == step_events()
    assert f"plus {len(ours)} stallscope events" in capsys.readouterr().err


def test_a_stream_whose_only_event_list_is_nested_has_none_to_add_to(tmp_path):
    src = io.BytesIO(b'{"otherData": {"traceEvents": []}, "x": "traceEvents: ["}')
    with pytest.raises(StallscopeError, match=r"^x.json: no top-level traceEvents array"):
        list(_splice(src, io.BytesIO(), b"{}", Path("x.json")))


def _junit(tmp_path: Path, name: str, capsys) -> tuple[int, ET.Element, str]:
    folder = tmp_path / name
    shutil.copytree(SESSION, folder)
    junit = tmp_path / "check.xml"
    rc = cli.main(["check", str(folder), "--max-data-wait", "1%", "--junit", str(junit)])
    out = capsys.readouterr()
    raw = junit.read_bytes()
    raw.decode("utf-8")  # strict: every byte is UTF-8
    return rc, ET.fromstring(raw), out.err


def test_junit_with_a_non_utf8_file_name_is_written_with_replacement(tmp_path, capsys):
    name = os.fsdecode(b"run-\xff\xfe")
    rc, suite, err = _junit(tmp_path, name, capsys)
    assert rc == 1 and err == "", err
    path = suite.find("properties/property").get("value")
    assert path == str(tmp_path / "run-\ufffd\ufffd")
    assert suite.get("failures") == "1"


def test_junit_with_control_characters_in_a_name_is_valid_xml(tmp_path, capsys):
    name = "run-\x1b[31m-\x01-\u202e-\x7f"
    rc, suite, _ = _junit(tmp_path, name, capsys)
    assert rc == 1
    path = suite.find("properties/property").get("value")
    assert path == str(tmp_path / "run-\\x1b[31m-\\x01-\\u202e-\\x7f")
    failure = suite.find("testcase/failure")
    assert failure is not None and "data wait" in failure.get("message")
