"""`stallscope-cli export SESSION --perfetto OUT` adds the whole run (record.bin) beside the
profiled window: counter tracks of step time, data wait and memory, one point per recorded
step, on the trace's clock (the trace's ProfilerStep#N lands on the record's step N), and the
profiled window as a slice; the exported file reopens with the trace's own figures."""

from __future__ import annotations

import json

import numpy as np
import pytest
from runner_helpers import run, write_script

from stallscope.core import cli
from stallscope.core.analysis import analyze
from stallscope.core.render.perfetto import PID, WINDOWS_TID
from stallscope.core.session.reader import open_session
from stallscope.core.session.record import load_record
from stallscope.core.trace import load

pytestmark = pytest.mark.runner

SCRIPT = """
import time, torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 30
    def __getitem__(self, i):
        time.sleep(0.004 if i % 10 else 0.02)  # every tenth batch waits longer
        return torch.randn(8)

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x in DataLoader(Slow(), batch_size=None):
    model(x).sum().backward()
    opt.step()
"""


def test_a_session_exports_its_whole_run_as_counter_tracks(tmp_path, capsys):
    script = write_script(tmp_path, SCRIPT)
    proc, session = run(tmp_path, script, "--profile-at", "12", "--active", "3",
                        "--warmup", "1", "--no-stop-after-window")
    assert proc.returncode == 0, proc.stderr
    rec = load_record(open_session(session))
    assert rec is not None and len(rec.blocks) == 0 and rec.n_steps == 30
    out = tmp_path / "run.json"
    assert cli.main(["export", str(session), "--perfetto", str(out)]) == 0
    err = capsys.readouterr().err
    assert "whole run: 30 steps from record.bin as counter tracks" in err
    events = json.loads(out.read_text(encoding="utf-8"))["traceEvents"]
    ours = [e for e in events if e.get("pid") == PID]

    def track(name):
        return [e for e in ours if e["ph"] == "C" and e["name"] == name]

    walls = track("run: step time (ms)")
    assert [e["args"]["mean"] for e in walls] == [round(float(v), 3)
                                                  for v in rec.steps["wall_ms"]]
    waits = track("run: data wait (ms)")
    assert [e["args"]["mean"] for e in waits] == [round(float(v), 3)
                                                  for v in rec.steps["data_wait_ms"]]
    ts = np.array([e["ts"] for e in walls])
    assert np.all(np.diff(ts) > 0)  # one point per step, in order
    # a step apart in the record is as far apart on the trace's clock
    gaps_ms = np.diff(ts) / 1e3
    record_gaps = np.diff(rec.steps["t"] - rec.steps["wall_ms"] / 1e3) * 1e3
    assert gaps_ms == pytest.approx(record_gaps, abs=0.01)
    memory = track("run: memory (MB)")
    assert len(memory) == 30 and all(e["args"]["RSS"] > 10 for e in memory)

    # tied to the trace: each profiled step starts where the record says it did
    trace_path = open_session(session).traces()[-1]
    report = analyze(load(trace_path))
    step_ts = {int(s.name.rpartition("#")[2]): s.start_us for s in report.steps}
    assert sorted(step_ts) == [12, 13, 14]
    n = list(rec.steps["n"])
    for number, start in step_ts.items():
        assert abs(walls[n.index(number)]["ts"] - start) < 1_000  # within 1 ms (steps: 5+ ms)
    (window,) = [e for e in ours if e.get("tid") == WINDOWS_TID and e["ph"] == "X"]
    assert window["name"] == "profiled steps 12-14"
    assert window["ts"] <= min(step_ts.values()) + 2_000
    assert window["ts"] + window["dur"] >= max(s.start_us + s.dur_us
                                               for s in report.steps) - 2_000
    # the trace's own figures are untouched by the added tracks
    before, after = report.to_json(), analyze(load(out)).to_json()
    before.pop("trace")
    after.pop("trace")
    assert after == before
