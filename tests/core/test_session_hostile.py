"""A session folder from elsewhere (run.json, events*.jsonl, record.bin) read through one bounded
decoder (core/untrusted.py): a bad file is one line naming it, a bad field is left out and the
rest stands. Cases from issue 29, each generated in tmp_path, plus a fuzz of the fields."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stallscope.core import cli
from stallscope.core.capture import record as fmt
from stallscope.core.errors import StallscopeError
from stallscope.core.render.run_text import render_run
from stallscope.core.session.reader import is_session, open_session
from stallscope.core.session.record import BLOCK_DTYPE, STEP_DTYPE, load_record, read_record
from stallscope.core.session.stalls import analyze_run

SESSION = Path(__file__).parent / "steady_sessions" / "io-2workers"


def _copy(tmp_path: Path, name: str = "s") -> Path:
    dst = tmp_path / name
    shutil.copytree(SESSION, dst)
    return dst


def _cli(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _step(n: int, t: float, **extra) -> dict:
    return {"event": "step", "t": t, "n": n, "wall_ms": 5.0, "data_wait_ms": 1.0,
            "batches": 1, "phase": "done", **extra}


def test_run_json_of_50_mb_of_brackets_is_one_line_and_the_rest_stands(tmp_path, capsys):
    s = _copy(tmp_path)
    (s / "run.json").write_bytes(b"[" * (50 << 20))
    with pytest.raises(StallscopeError, match=r"run\.json: 50\.0 MiB, larger than"):
        open_session(s)
    rc, out, err = _cli(capsys, "analyze", s)
    assert rc == 0 and "run.json" in err and len(err.splitlines()) == 1, err
    assert "data" in out  # the trace's report stands


def test_run_json_nested_under_the_cap_is_refused_by_depth(tmp_path):
    s = _copy(tmp_path)
    (s / "run.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(StallscopeError, match="nested too deep"):
        open_session(s)
    (s / "run.json").write_bytes(b'{"a": ' + b"[" * 80 + b"]" * 80 + b"}")
    with pytest.raises(StallscopeError, match="nested more than 64 levels"):
        open_session(s)


def test_num_workers_many_is_left_out_not_a_value_error(tmp_path):
    s = _copy(tmp_path)
    run = json.loads((s / "run.json").read_text())
    loader = run["dataloaders"][0]
    loader["effective"]["num_workers"] = "many"
    loader["effective"]["prefetch_factor"] = -3
    loader["passed"]["batch_size"] = 10**400
    loader["batches"] = "80"
    (s / "run.json").write_text(json.dumps(run))
    session = open_session(s)
    loader = session.loaders()[0]
    assert "num_workers" not in loader["effective"]
    assert "prefetch_factor" not in loader["effective"]
    assert loader["passed"]["batch_size"] is None and "batches" not in loader
    assert loader["effective"]["pin_memory"] is False  # the rest stands
    assert session.summary()["steps"] == 80


def test_huge_integers_and_nan_in_events_are_left_out(tmp_path, capsys):
    s = _copy(tmp_path)
    t = json.loads((s / "events.jsonl").read_text().splitlines()[-1])["t"]
    big = "1" + "0" * 400
    with open(s / "events.jsonl", "a") as f:
        f.write(f'{{"event": "step", "t": {t + 1}, "n": 80, "wall_ms": {big}, '
                f'"data_wait_ms": NaN, "batches": Infinity, "phase": "done"}}\n')
        f.write(f'{{"event": "epoch", "t": {t + 1}, "loader": 0, "n": 80, "epoch": {big}, '
                f'"workers": {big}, "fetch_ms": 1e999}}\n')
        f.write(f'{{"event": "step", "t": "{big}", "n": 81}}\n')
    session = open_session(s)
    odd = next(e for e in session.events if e.get("event") == "epoch")
    assert odd["workers"] is None and odd["epoch"] is None and odd["fetch_ms"] is None
    step = next(e for e in session.events if e.get("n") == 80 and e.get("event") == "step")
    assert step["wall_ms"] is None and step["data_wait_ms"] is None
    assert session.summary()["steps"] == 82
    rc, out, err = _cli(capsys, "info", s)
    assert rc == 0 and err == "", err


def _record_bytes(t0: float, steps: np.ndarray, blocks: np.ndarray | None = None,
                  block: int = fmt.BLOCK) -> bytes:
    blocks = np.zeros(0, BLOCK_DTYPE) if blocks is None else blocks
    head = fmt.HEADER.pack(fmt.MAGIC, fmt.VERSION, len(blocks), block, fmt.RECENT_MAX, t0)
    return head.ljust(fmt.HEADER_SIZE, b"\0") + blocks.tobytes() + steps.tobytes()


def _steps(n: int, t0: float = 1000.0) -> np.ndarray:
    s = np.zeros(n, STEP_DTYPE)
    s["n"], s["t"] = np.arange(n), t0 + 0.01 * np.arange(1, n + 1)
    s["wall_ms"], s["data_wait_ms"], s["batches"] = 10.0, 2.0, 1
    return s


def test_a_record_with_a_damaged_header_is_one_line(tmp_path):
    path = tmp_path / "record.bin"
    for t0, block in ((float("nan"), 1024), (float("inf"), 1024), (1000.0, 0)):
        path.write_bytes(_record_bytes(t0, _steps(10), block=block))
        with pytest.raises(StallscopeError, match="damaged run record header"):
            read_record(path)
    path.write_bytes(_record_bytes(1000.0, _steps(10)))
    assert read_record(path).n_steps == 10


def test_a_record_that_is_a_fifo_is_refused_by_its_kind(tmp_path):
    path = tmp_path / "record.bin"
    os.mkfifo(path)
    with pytest.raises(StallscopeError, match="record.bin: is a FIFO, not a regular file"):
        read_record(path)


@contextmanager
def _as_nobody():
    """This process's effective user is `nobody` for the block (root reads every folder)."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_a_folder_without_read_permission_is_one_line(capsys):
    top = Path(tempfile.mkdtemp(prefix="stallscope-perm-"))  # tmp_path is 0700: nobody's out
    try:
        top.chmod(0o755)
        s = top / "s"
        shutil.copytree(SESSION, s)
        s.chmod(0)
        with _as_nobody():
            assert is_session(s) is False
            for command in ("analyze", "info"):
                rc, out, err = _cli(capsys, command, s)
                assert rc == 2 and out == "", (command, out)
                assert err.strip() == f"stallscope: error: {s}: cannot read this folder " \
                                      "(Permission denied)", err
    finally:
        (top / "s").chmod(stat.S_IRWXU)
        shutil.rmtree(top)


# -- fuzz: any value in the fields the analysis reads ends in a report or one StallscopeError

NUMBERS = st.one_of(st.integers(min_value=-(10**30), max_value=10**30),
                    st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.none(), st.text(max_size=5), st.lists(st.integers(), max_size=3))
STEP_KEYS = ("n", "t", "wall_ms", "data_wait_ms", "batches", "rss", "phase", "rank")
EPOCH_KEYS = ("loader", "n", "epoch", "workers", "fetch_ms", "first_batch_ms", "site")


def _line(event: str, fields: dict) -> str:
    return json.dumps({"event": event, **fields}, allow_nan=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.fixed_dictionaries({}, optional={k: NUMBERS for k in STEP_KEYS}),
                      max_size=6),
       epochs=st.lists(st.fixed_dictionaries({}, optional={k: NUMBERS for k in EPOCH_KEYS}),
                       max_size=3),
       loader=st.fixed_dictionaries({}, optional={k: NUMBERS for k in
                                                  ("num_workers", "prefetch_factor",
                                                   "batch_size")}),
       batches=NUMBERS,
       t0=st.floats(allow_nan=True, allow_infinity=True),
       walls=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=1,
                      max_size=6),
       big=st.sampled_from(["1" + "0" * 400, "-1e999", "NaN", "12"]))
def test_fuzzed_session_fields_end_in_a_report_or_one_line(tmp_path, steps, epochs, loader,
                                                           batches, t0, walls, big):
    s = Path(tempfile.mkdtemp(dir=tmp_path))
    run = {"script": "x.py", "dataloaders": [{"effective": loader, "passed": loader,
                                              "batches": batches}]}
    (s / "run.json").write_text(json.dumps(run, allow_nan=True))
    lines = [_line("step", e) for e in steps] + [_line("epoch", e) for e in epochs]
    lines.append(f'{{"event": "save", "n": {big}, "ms": {big}, "bytes": {big}}}')
    (s / "events.jsonl").write_text("\n".join(lines) + "\n")
    rec = _steps(len(walls))
    rec["wall_ms"] = walls
    (s / "record.bin").write_bytes(_record_bytes(t0, rec))
    try:
        session = open_session(s)
        json.dumps(session.summary(), default=str)
        record = load_record(session)
        if record is not None and record.n_steps:
            render_run(analyze_run(record))
            json.dumps(analyze_run(record).to_json(), default=str)
    except StallscopeError as exc:
        assert "\n" not in str(exc) and str(s) in str(exc)


@pytest.mark.parametrize("data, words", [
    (b"[" * (50 << 20), "tune.json: 50.0 MiB, larger than the 16.0 MiB read"),
    (b"[" * 5000 + b"]" * 5000, "tune.json is nested too deep"),
    (b'{"trials": "many"}', "not a readable tune.json"),
    (b'{"trials": [{"n": 1' + b"0" * 400 + b"}]}", "not a readable tune.json"),
])
def test_a_hostile_tune_json_is_one_line(tmp_path, data, words):
    from stallscope.core.tune.result import load_result

    (tmp_path / "tune.json").write_bytes(data)
    with pytest.raises(StallscopeError, match=words) as err:
        load_result(tmp_path)
    assert "\n" not in str(err.value)


def test_a_long_exception_message_from_a_session_is_shortened(tmp_path):
    s = _copy(tmp_path)
    shutil.rmtree(s / "traces")
    message = "m" * 900_000  # under the 1 MiB line cap: the line is read, its text shortened
    with open(s / "events.jsonl", "a") as f:
        f.write(json.dumps({"event": "finished", "t": 1.8e9, "rc": 1, "reason": "exception",
                            "exception": {"type": "ValueError", "message": message,
                                          "step": 3}}) + "\n")
    assert open_session(s).summary()["exception"]["message"].endswith(
        f"… ({900_000 - 2000:,} more characters)")
    why = open_session(s).no_trace_reason()
    assert len(why) < 3000 and "\n" not in why
    assert "raised ValueError: mmm" in why and "more characters) at step 3" in why
