"""`stallscope-cli export SESSION --perfetto OUT` adds the whole run (record.bin) beside the
profiled window: counter tracks of step time, data wait and memory, one point per recorded
step, on the trace's clock (the trace's ProfilerStep#N lands on the record's step N), and the
profiled window as a slice; the exported file reopens with the trace's own figures."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from runner_helpers import run, write_script

from stallscope.core import cli
from stallscope.core.analysis import analyze
from stallscope.core.render import perfetto
from stallscope.core.render.perfetto import PID, WINDOWS_TID, whole_run_events
from stallscope.core.session.reader import open_session
from stallscope.core.session.record import BLOCK_DTYPE, STEP_DTYPE, Record, Window, load_record
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

    # tied to the trace by the profiled steps: the median step lands exactly on its
    # ProfilerStep#N (the others within the two clocks' jitter: see the synthetic test below)
    trace_path = open_session(session).traces()[-1]
    report = analyze(load(trace_path))
    step_ts = {int(s.name.rpartition("#")[2]): s.start_us for s in report.steps}
    assert sorted(step_ts) == [12, 13, 14]
    n = list(rec.steps["n"])
    off = sorted(walls[n.index(k)]["ts"] - start for k, start in step_ts.items())
    assert abs(off[1]) < 1.0  # µs
    (window,) = [e for e in ours if e.get("tid") == WINDOWS_TID and e["ph"] == "X"]
    assert window["name"] == "profiled steps 12-14"
    assert window["ts"] == pytest.approx(walls[n.index(12)]["ts"], abs=1e-3)
    end_14 = walls[n.index(14)]["ts"] + float(rec.steps["wall_ms"][n.index(14)]) * 1e3
    assert window["ts"] + window["dur"] == pytest.approx(end_14, abs=1.0)
    # the trace's own figures are untouched by the added tracks
    before, after = report.to_json(), analyze(load(out)).to_json()
    before.pop("trace")
    after.pop("trace")
    assert after == before


def synthetic_record(walls_ms: list[float]) -> Record:
    """Steps 0..N-1 back to back from the run's start: step n ends at the sum of walls."""
    steps = np.zeros(len(walls_ms), STEP_DTYPE)
    steps["n"] = np.arange(len(walls_ms))
    steps["wall_ms"] = walls_ms
    steps["t"] = np.cumsum(walls_ms) / 1e3
    steps["data_wait_ms"] = np.array(walls_ms) / 2
    steps["rss_mb"] = 100.0
    steps["cuda_allocated_mb"] = np.nan  # not recorded: no CUDA series
    return Record(Path("record.bin"), 0.0, 64, np.zeros(0, BLOCK_DTYPE), steps,
                  windows=[Window(3, 5, "traces/x.json")])


def test_the_record_lands_on_the_trace_clock_by_the_steps_both_hold(monkeypatch):
    rec = synthetic_record([10.0] * 10)
    base = 5e6  # the trace's clock: step n starts at base + n x 10 ms
    jitter = {3: 0.0, 4: 300.0, 5: 0.0}  # one step's marker late: the median ignores it
    report = SimpleNamespace(steps=[SimpleNamespace(name=f"ProfilerStep#{k}",
                                                    start_us=base + k * 1e4 + j)
                                    for k, j in jitter.items()])
    events = whole_run_events(rec, report)
    walls = [e for e in events if e.get("name") == "run: step time (ms)"]
    assert [e["ts"] for e in walls] == pytest.approx([base + k * 1e4 for k in range(10)])
    memory = [e for e in events if e.get("name") == "run: memory (MB)"]
    assert all(e["args"] == {"RSS": 100.0} for e in memory)  # no NaN CUDA series
    (window,) = [e for e in events if e.get("tid") == WINDOWS_TID and e["ph"] == "X"]
    assert (window["ts"], window["dur"]) == pytest.approx((base + 3e4, 3e4))
    # a trace whose steps the record does not hold: nothing is placed
    other = SimpleNamespace(steps=[SimpleNamespace(name="ProfilerStep#99", start_us=0.0)])
    assert whole_run_events(rec, other) == []
    # a long run folds into at most MAX_RUN_POINTS points, means weighted by steps
    monkeypatch.setattr(perfetto, "MAX_RUN_POINTS", 4)
    folded = [e for e in whole_run_events(synthetic_record([10.0] * 9 + [40.0]), report)
              if e.get("name") == "run: step time (ms)"]
    assert [e["args"]["mean"] for e in folded] == [10.0, 10.0, 10.0, 40.0]
