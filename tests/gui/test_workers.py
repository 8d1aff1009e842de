"""JobRunner: one live job per slot, `busy` the only record of what runs (issue 18): its
transitions, superseded jobs' late signals dropped, on real worker threads."""

from __future__ import annotations

import threading

from stallscope.gui.workers import JobRunner, JobWorker


def waiting_job(gate: threading.Event, answer: str):
    """A generator job that reports progress until `gate` opens (or it is cancelled)."""

    def make(cancel):
        def job():
            done = 0
            while not gate.wait(0.01):
                done += 1
                yield done, 0
            return answer

        return job()

    return make


def test_busy_turns_on_with_the_first_job_and_off_with_the_last(qtbot):
    runner = JobRunner()
    changes: list[bool] = []
    runner.sig_busy_changed.connect(changes.append)
    gates = [threading.Event(), threading.Event()]
    assert not runner.busy
    a = runner.start(JobWorker(waiting_job(gates[0], "a")), "main")
    b = runner.start(JobWorker(waiting_job(gates[1], "b")), "compare")
    assert runner.busy and changes == [True]  # a second slot: still one busy period
    with qtbot.waitSignal(a.signals.sig_finished, timeout=10_000):
        gates[0].set()
    assert runner.busy and changes == [True] and not runner.is_current(a, "main")
    with qtbot.waitSignal(runner.sig_busy_changed, timeout=10_000):
        gates[1].set()
    assert not runner.busy and changes == [True, False] and not runner.is_current(b, "compare")


def test_a_superseded_job_is_cancelled_and_its_late_signals_are_dropped(qtbot):
    runner = JobRunner()
    gate = threading.Event()
    results: list[str] = []
    old = JobWorker(waiting_job(gate, "old"))
    old.signals.sig_result.connect(runner.while_current(old, "main")(results.append))
    runner.start(old, "main")
    new = JobWorker(waiting_job(gate, "new"))
    new.signals.sig_result.connect(runner.while_current(new, "main")(results.append))
    with qtbot.waitSignal(old.signals.sig_cancelled, timeout=10_000):
        runner.start(new, "main")
    assert old.cancel_flag.is_set() and runner.is_current(new, "main") and runner.busy
    with qtbot.waitSignal(runner.sig_busy_changed, timeout=10_000) as idle:
        gate.set()
    assert idle.args == [False] and results == ["new"]


def test_cancel_without_a_slot_cancels_every_live_job(qtbot):
    runner = JobRunner()
    gate = threading.Event()
    workers = [runner.start(JobWorker(waiting_job(gate, s)), s) for s in ("one", "two")]
    with qtbot.waitSignal(runner.sig_busy_changed, timeout=10_000):
        runner.cancel()
    assert all(w.cancel_flag.is_set() for w in workers) and not runner.busy
