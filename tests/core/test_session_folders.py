"""A run never writes into a folder an earlier run wrote (its events, records and traces would
mix with the new run's, and every figure read from the folder would be both runs'): run and
the launcher (the app's, check's, tune's trials) refuse such a session folder, tune an --out
folder holding an earlier tune, each in one line naming the folder and what it holds; the
earlier files stay as they were. (A remote run's folder there: tests/core/test_remote_run.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stallscope.core import cli
from stallscope.core.capture.layout import earlier_run
from stallscope.core.errors import StallscopeError
from stallscope.core.launch import Job, Where, start

SCRIPT = "print('never runs')\n"


def earlier(folder: Path, name: str) -> bytes:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b'{"event": "started"}\n'
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("name", ["events.jsonl", "events.rank1.jsonl", "run.json",
                                  "record.bin", "traces/t.pt.trace.json.gz"])
def test_a_session_folder_holding_an_earlier_run_is_refused(tmp_path, capsys, name):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    session = tmp_path / "s"
    data = earlier(session, name)
    assert earlier_run(session) == name
    rc = cli.main(["run", "--session", str(session), "--", str(script)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert f"{session}: holds an earlier run ({name})" in err and "Traceback" not in err
    with pytest.raises(StallscopeError, match="holds an earlier run"):
        start(Where(), Job(script=str(script), session=session))
    assert (session / name).read_bytes() == data
    assert sorted(p.relative_to(session).as_posix() for p in session.rglob("*")
                  if p.is_file()) == [name]


def test_an_empty_or_absent_folder_holds_no_run(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    for folder in ("empty", "other", "absent"):
        assert earlier_run(tmp_path / folder) is None


@pytest.mark.parametrize("name", ["tune.json", "01-as-written/events.jsonl"])
def test_a_tune_folder_holding_an_earlier_tune_is_refused(tmp_path, capsys, name):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / "tune"
    data = earlier(out, name)
    rc = cli.main(["tune", "--out", str(out), "--", str(script)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert f"{out}: holds an earlier tune ({name})" in err and "Traceback" not in err
    assert (out / name).read_bytes() == data
    assert len([p for p in out.rglob("*") if p.is_file()]) == 1
