"""The runner's cost on unprofiled steps (issue 34): past its last window the profiler is not
stepped and backward() is not annotated, while the trace, events.jsonl and record.bin keep what
they kept (tests/bench/bench_step_cost.py measures the cost)."""

from __future__ import annotations

import pytest
from runner_helpers import events, finished, run, spans, trace_events, write_script

from stallscope.core.session.reader import open_session
from stallscope.core.session.record import load_record

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess)

SCRIPT = """
import torch
from torch.utils.data import DataLoader, TensorDataset

calls = []
step = -1
enter = torch.ops.profiler._record_function_enter_new

def seen(name, *args):  # every record_function entered, noted with the step it fell in
    calls.append((step, name))
    return enter(name, *args)

torch.ops.profiler._record_function_enter_new = seen
w = torch.nn.Parameter(torch.zeros(4))
opt = torch.optim.SGD([w], lr=0.01)
for step, (x,) in enumerate(DataLoader(TensorDataset(torch.randn(10, 4)), batch_size=1)):
    loss = (w * x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("BACKWARD_AT", [s for s, name in calls if name == "stallscope#backward"])
print("PROFILER_STEPS_AT", [s for s, name in calls if name.startswith("ProfilerStep#")])
"""


def test_unprofiled_steps_skip_the_profiler_and_keep_every_step(tmp_path):
    script = write_script(tmp_path, SCRIPT)
    proc, session = run(tmp_path, script, "--no-stop-after-window", "--active", "2")
    assert proc.returncode == 0, proc.stderr
    out = (session / "stdout.log").read_text()
    # wait 0, warmup 1, active 2-3: annotated while the profiler records, never after
    assert "BACKWARD_AT [1, 2, 3]" in out, out
    # the profiler's own step spans open in prof.step(): none once the window is over
    at = eval(out.split("PROFILER_STEPS_AT ", 1)[1].splitlines()[0])
    assert at and max(at) <= 3, at

    steps = events(session, "step")
    assert [s["n"] for s in steps] == list(range(10))
    assert [s["phase"] for s in steps] == ["wait", "warmup", "active", "active"] + ["done"] * 6
    assert finished(session)["steps"] == 10
    record = load_record(open_session(session))
    assert record is not None and record.n_steps == 10

    trace = trace_events(session / finished(session)["traces"][0])
    prof_steps = spans(trace, "ProfilerStep#")
    assert [n for _, _, n in prof_steps] == ["ProfilerStep#2", "ProfilerStep#3"]
    backward = spans(trace, "stallscope#backward")
    assert len(backward) == 2
    for (lo, hi, _), (blo, bhi, _) in zip(prof_steps, backward, strict=True):
        assert lo <= blo < bhi <= hi
