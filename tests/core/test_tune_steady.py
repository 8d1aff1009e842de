"""The steady statistic (core/session/steady.py) and the noise rule (core/tune/noise.py) on real
recorded runs, and compare stating the same figure (issue 21).

tests/core/steady_sessions/ holds sessions the real runner wrote on a 2-core machine (under
load from other work) for a script whose every sample sleeps 10 ms, batches of 8, plus 5 ms of
compute per step: one worker needs 80 ms per batch, so N workers deliver a batch every 80/N ms
at best, and 0 workers take 80 + 5 ms per step.

- io-2workers: `--set num_workers=2`, profiling window at steps 1-4, run to the end (80 steps)
- io-as-written-1/2, io-16workers-1/2: two alternating pairs of a tune's trials (0 workers and
  16 workers; the tune stopped each once its steady window was measured)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from stallscope.core.cli import main
from stallscope.core.compare import compare_reports, speedup, statistic
from stallscope.core.document import load_document_job
from stallscope.core.jobs import run_job
from stallscope.core.session.reader import open_session
from stallscope.core.session.steady import MIN_S, MIN_STEPS, queued_batches, steady
from stallscope.core.tune import noise

DATA = Path(__file__).resolve().parent / "steady_sessions"


def session(name: str, tmp_path: Path | None = None):
    path = DATA / name
    if tmp_path is not None:  # a copy a test may cut or write to
        path = Path(shutil.copytree(path, tmp_path / name))
    return open_session(path)


def test_two_workers_steady_is_the_physical_rate_where_a_median_is_not():
    s = session("io-2workers")
    steps = s.steps()
    assert len(steps) == 80 and steps.phase[1:5] == ["warmup", "active", "active", "active"]
    assert queued_batches(s.loaders()) == 4  # 2 workers x prefetch_factor 2
    rank, w = s.steady()
    assert rank is None and w.reached and not w.note
    # after the last profiled step (4): the 4 queued batches, then 3 settling steps
    assert w.first == 4 + 1 + 4 + 3
    assert w.steps == 80 - w.first and w.seconds >= MIN_S and w.steps >= MIN_STEPS
    # the window's time is the event clock's: elapsed from the step before it to its last step
    assert w.seconds == pytest.approx(steps.t[-1] - steps.t[w.first - 1])
    # two workers deliver a batch every 40 ms at best (80 ms each); 5 ms compute hides in it
    assert 40.0 <= w.step_ms <= 46.0
    assert w.data_wait_share == pytest.approx(
        np.sum(steps.data_wait_ms[w.first:]) / (1e3 * w.seconds))
    # the old figure, a median of the few steps after the window, lands on the queued batches
    # or on the ones that waited a whole batch: nowhere near the rate
    old = float(np.median(steps.wall_ms[5:12]))
    assert not 0.7 * w.step_ms < old < 1.3 * w.step_ms


def test_a_run_cut_short_says_it_did_not_reach_steady_state(tmp_path):
    s = session("io-2workers", tmp_path)
    events = (Path(s.path) / "events.jsonl").read_text().splitlines()
    cut = []
    for line in events:
        record = json.loads(line)
        if record["event"] == "step" and record["n"] >= 14:
            continue
        cut.append(line)
    (Path(s.path) / "events.jsonl").write_text("\n".join(cut) + "\n")
    _, w = open_session(s.path).steady()
    assert w.steps == 14 - 12 and not w.reached
    assert w.note == (f"only 2 steady steps over {w.seconds:.1f} s after the warm-up: too "
                      "short to reach steady state (20 steps over 2 s)")
    summary = open_session(s.path).summary()
    assert summary["steady_reached"] is False and summary["steady_steps"] == 2


def test_alternating_pairs_of_real_trials_are_beyond_the_noise():
    pairs = [("io-as-written-1", "io-16workers-1"), ("io-as-written-2", "io-16workers-2")]
    ratios = []
    for before, after in pairs:
        (_, b), (_, a) = session(before).steady(), session(after).steady()
        assert b.reached and a.reached
        assert 80.0 <= b.step_ms <= 100.0          # 80 ms of sleep + 5 ms compute + overhead
        assert 80.0 / 16 <= a.step_ms <= 15.0      # 16 workers: the 5 ms of compute and overhead
        ratios.append(b.step_ms / a.step_ms)
    assert noise.decide(ratios, 0.05) == noise.ADOPT
    lo, hi = min(ratios), max(ratios)
    assert noise.interval_text(ratios) == f"{lo:.2f}x, {lo:.2f}-{hi:.2f}x over 2 pairs"
    # the same sessions against themselves: a pair of equals is within noise
    same = [session(b).steady()[1].step_ms / session(a).steady()[1].step_ms
            for a, b in (("io-as-written-1", "io-as-written-2"),
                         ("io-as-written-2", "io-as-written-1"))]
    assert noise.decide(same, 0.05) == noise.NOISE


def test_compare_of_two_sessions_states_the_steady_speed_up(capsys):
    before, after = DATA / "io-as-written-2", DATA / "io-16workers-2"
    (_, b), (_, a) = open_session(before).steady(), open_session(after).steady()
    want = b.step_ms / a.step_ms
    # the compare view's computation: the documents the app loads, core.compare's metrics
    metrics = compare_reports(run_job(load_document_job(before)).reports[0],
                              run_job(load_document_job(after)).reports[0])
    by_key = {m.key: m for m in metrics}
    assert by_key["step_ms"].label == "step time (steady mean)"
    assert by_key["step_ms"].before == pytest.approx(b.step_ms)
    assert by_key["data_wait_pct"].after == pytest.approx(100 * a.data_wait_share)
    assert speedup(metrics) == pytest.approx(want)
    assert statistic(metrics).startswith("steady mean of the sessions' recorded steps")
    # the profiled window's own mean is beside it, informational (no verdict)
    assert by_key["window_step_ms"].verdict == "n/a"
    assert main(["compare", str(before), str(after), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["speedup"] == pytest.approx(want)
    assert main(["compare", str(before), str(after)]) == 0
    assert f"speed-up: {want:.2f}x (step time: steady mean" in capsys.readouterr().out


def test_live_step_columns_give_the_session_figure():
    """The run view's live columns (core/session/events.StepColumns) and the finished session
    state the same steady figure."""
    from stallscope.core.session.events import StepColumns, typed

    s = session("io-2workers")
    cols = StepColumns()
    for record in s.events:
        if record["event"] == "step":
            cols.add(typed(record))
    live = cols.steady(queued_batches(s.loaders()))
    assert live == s.steady()[1]


def test_a_run_whose_last_window_ends_near_its_end_says_so():
    # hunt: 128 steps with --profile-every 20 read "too short to reach steady state (it needs
    # the warm-up, then 20 steps over 2 s)", though it had 128 steps over 9.7 s: the steady
    # figure starts after the last profiling window, which ended a step before the run
    k = 128
    phase = ["wait"] + ["between"] * (k - 1)
    for first in range(21, k - 6, 20):
        phase[first - 1] = "warmup"
        phase[first:first + 4] = ["active"] * 4
    phase[k - 6] = "warmup"
    phase[k - 5:k - 1] = ["active"] * 4
    t = np.cumsum(np.full(k, 0.075))
    w = steady(t, np.full(k, 75.0), np.zeros(k), np.ones(k), phase)
    assert w is not None and not w.reached
    assert w.note.startswith("only 1 step after the last profiling window: too short to reach "
                             "steady state (it needs the warm-up after that window, then 20 "
                             "steps over 2 s)"), w.note
