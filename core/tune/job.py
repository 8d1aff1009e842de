"""`tune_job`: short trials of the unmodified script, each a session folder inside one tune
folder, searching DataLoader settings (core/tune/search.py), then checking the leader against
the script as written in alternating pairs (core/tune/noise.py). A generator job (core/jobs.py)
yielding (done, total); the GUI runs it off its thread, the CLI drains it.

    result = run_job(tune_job(TuneConfig(script=Path("train.py"), args=[], cwd=Path.cwd())))

The first trial runs the script as written; it names the DataLoader to tune (the one that served
the most batches) and the settings it was built with. Every later trial changes that DataLoader
only, with `--set file:line:key=value`. Before a trial with W workers, memory is checked against
main + W x (private memory of one worker in an earlier trial); a trial that would not fit is
skipped, one that grows past the limit while running is stopped. A trial that crashes is
reported and the search goes on without it. Cancel (or Ctrl-C) stops the running trial; the
finished ones stay in tune.json.

Each trial's figure is its steady step time (core/session/steady.py) on unprofiled steps after
a short profiled window; with `nproc_per_node` > 1 every trial runs under torchrun and its
figure is the slowest rank's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# the advice's num_workers and its DataLoader are the tune's
from stallscope.core.advice.fixes import usable_cores
from stallscope.core.capture.layout import earlier_run
from stallscope.core.capture.options import default_session_dir
from stallscope.core.capture.overrides import DEFAULTS, KEYS
from stallscope.core.errors import Cancelled, StallscopeError
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.launch import Where
from stallscope.core.session.reader import open_session
from stallscope.core.session.steady import busiest_loader
from stallscope.core.tune import duels, noise
from stallscope.core.tune.memory import GUARD, memory_limit, over_limit_text
from stallscope.core.tune.result import TuneResult
from stallscope.core.tune.search import MIN_GAIN, Search, most_workers_default
from stallscope.core.tune.trial import (
    OVER_BUDGET,
    SKIPPED,
    Launch,
    Trial,
    changes_from,
    epoch_length,
    run_trial,
    settings_text,
)

DEFAULT_BUDGET_S = 600.0
# The trials stop this long before the budget's end: stopping one (SIGTERM, the runner writes
# what it has, its workers end) and reading its session fit in it, so the budget is a ceiling
STOP_MARGIN_S = 2.0
SHORT_EPOCHS = 3  # epoch starts in the first trial that make the climb keep its workers
# the profiled window (a trace for the compare view) opens each trial; the figures come later
TRIAL_SCHEDULE = {"wait": 1, "warmup": 1, "active": 3, "repeat": 1}


@dataclass
class TuneConfig:
    script: Path
    args: list[str] = field(default_factory=list)
    cwd: Path = field(default_factory=Path.cwd)
    python: str = ""
    out: Path | None = None            # the tune folder; default a tune-* folder in the
    #                                    user's data folder (capture.options.sessions_root)
    budget_s: float = DEFAULT_BUDGET_S
    memory_limit: int | None = None    # bytes; default STALLSCOPE_MEMORY_LIMIT or free memory
    max_workers: int | None = None     # the most num_workers tried; default
    #                                    most_workers_default (past the cores only on I/O)
    max_trials: int | None = None      # stop after this many trials (the first included)
    env: dict = field(default_factory=dict)
    min_gain: float = MIN_GAIN
    nproc_per_node: int = 1            # > 1: every trial under torchrun, the slowest rank counts
    where: Where | None = None         # a remote host (core/launch): the trials run there
    max_pairs: int = noise.MAX_PAIRS

    def folder(self) -> Path:
        if self.out is not None:
            return Path(self.out).expanduser().resolve()
        return default_session_dir(f"tune-{self.script.stem}")


def earlier_tune(folder: Path) -> str | None:
    """What of an earlier tune or run a tune folder holds (its tune.json, a trial's session):
    the trials' sessions would mix with the earlier ones (trial 1 is always 01-as-written)."""
    held = earlier_run(folder)
    if held is not None or not folder.is_dir():
        return held
    try:
        children = sorted(c for c in folder.iterdir() if c.is_dir())
    except OSError:
        return None  # unreadable: mkdir and the first trial say why
    for child in children:
        held = earlier_run(child)
        if held is not None:
            return f"{child.name}/{held}"
    return None


def tune_job(cfg: TuneConfig, cancel: CancelFlag | None = None,
             on_trial: Callable[[Trial, TuneResult], None] | None = None) -> Job[TuneResult]:
    import sys

    remote = cfg.where is not None and cfg.where.remote  # then the script is the host's
    script = Path(cfg.script) if remote else Path(cfg.script).expanduser().resolve()
    if not remote and not script.exists():
        raise StallscopeError(f"script not found: {script}")
    folder = cfg.folder()
    held = earlier_tune(folder)
    if held is not None:
        raise StallscopeError(f"{folder}: holds an earlier tune ({held}); give a new --out "
                              "folder (or move that one away)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StallscopeError(f"tune folder {folder}: {exc.strerror or exc}") from None
    nproc = max(1, int(cfg.nproc_per_node))
    cores = max(1, usable_cores() // nproc)  # the ranks' workers share the cores
    most = max(1, cfg.max_workers or most_workers_default(cores))
    limit = memory_limit(cfg.memory_limit)
    launch = Launch(script, list(cfg.args), Path(cfg.cwd), cfg.python or sys.executable,
                    dict(TRIAL_SCHEDULE), dict(cfg.env), nproc_per_node=nproc,
                    where=cfg.where)
    result = TuneResult(folder, str(script), list(cfg.args), budget_s=cfg.budget_s,
                        nproc_per_node=nproc)
    t0 = time.monotonic()
    deadline = t0 + max(0.0, cfg.budget_s - STOP_MARGIN_S)  # run_trial stops a trial there

    running: list[Trial] = []  # the trial under way, for an interrupt

    loads: list[float] = []  # the machine's 1-minute load average as each trial ended

    def finish(trial: Trial) -> None:
        running.clear()
        base = result.baseline_trial
        note = per_script_batches(trial, base) if base is not None else None
        if note and note not in result.notes:
            result.notes.append(note)
        loads.append(os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0)
        result.trials.append(trial)
        result.elapsed_s = time.monotonic() - t0
        result.save()
        if on_trial is not None:
            on_trial(trial, result)

    search: Search | None = None
    run = duels.Runner(cfg, result, launch, folder, deadline, limit, cancel, running,
                      finish)
    try:
        yield 0, 5
        base = Trial(1, duels.trial_name(1, {}), {}, {})
        running.append(base)
        run_trial(launch, base, folder, deadline, limit, cancel)
        result.baseline = base.index
        search = _start_search(result, base, launch, cores, most, cfg.min_gain)
        finish(base)
        if search is None:
            result.stopped = ("nothing to tune" if base.ok else
                              "the script as written could not be measured")
            if base.status == OVER_BUDGET:
                result.stopped = "budget"
                result.notes.append(f"the time budget ({cfg.budget_s:.0f} s) ran out during "
                                    "trial 1, the script as written")
            return result
        search.record(search.script, base.step_ms, base.data_wait_share, base.worker_cpu)
        result.best = base.index if base.ok else None
        yield 1, 1 + search.estimate_left()
        climbed = False  # the climb's leader was confirmed (or not) against the script
        pending: Trial | None = None  # the next rung, measured before this one's duel
        while True:
            search.noise = duels.measured_noise(result)
            settings = search.next()
            if search.stage != "workers" and not climbed:
                climbed = True  # the climb is over: its leader first, then the rest
                if not (yield from duels.leader_first(run, search)):
                    if result.stopped == "running":
                        result.stopped = "search done"
                    break
                settings = search.next()  # around the leader the pairs kept
            if settings is None:
                result.stopped = "search done"
                break
            index = len(result.trials) + 1
            # with a leader in the climb, the limit keeps two trials for repeating it against
            # the noise
            keep = (2 * (noise.MIN_PAIRS - 1) if search.stage == "workers"
                    and result.best not in (None, base.index) else 0)
            if pending is not None and pending.settings == settings:
                trial, pending = pending, None  # measured ahead of the last rung's duel
            else:
                pending = None
                if cfg.max_trials is not None and index > cfg.max_trials - keep:
                    result.stopped = "trial limit"
                    result.notes.append(f"stopped at the limit of {cfg.max_trials} trials"
                                        + (f" (the last {keep} repeat the leader against the "
                                           "noise)" if keep else "")
                                        + f": {_unanswered(result, search, settings)}")
                    break
                trial = _rung_trial(index, search, settings)
                why_not = _memory_check(result, settings, limit, nproc)
                if why_not:
                    trial.status, trial.message = SKIPPED, why_not
                    search.record(settings, None)
                    finish(trial)
                    continue
                left, typical = deadline - time.monotonic(), _typical_s(result)
                if left < 0.5 * typical:
                    result.stopped = "budget"
                    result.notes.append(f"the time budget ({cfg.budget_s:.0f} s) ran out after "
                                        f"{len(result.trials)} trials: "
                                        f"{_unanswered(result, search, settings)}")
                    break
                run.measure(trial)
            if trial.status == OVER_BUDGET:
                result.stopped = "budget"
                result.notes.append(f"the time budget ({cfg.budget_s:.0f} s) ran out during "
                                    f"trial {trial.index}: "
                                    f"{_unanswered(result, search, settings)}")
                search.record(settings, None)
                break
            ahead = search.ahead(trial.step_ms, trial.data_wait_share, trial.steady_reached)
            if trial.ok and ahead is not None:
                pending = yield from _run_ahead(run, search, ahead, keep)
                if pending is not None and search.beyond_doubt(pending.step_ms,
                                                               pending.steady_reached):
                    best = result.best_trial
                    result.notes.append(
                        f"{trial.label} measured {search.gain(trial.step_ms):.2f}x over "
                        f"{best.label if best else 'the best'}, not repeated: {pending.label} "
                        f"measured {search.gain(pending.step_ms):.2f}x over it")
                    search.record(settings, trial.step_ms, trial.data_wait_share,
                                  trial.worker_cpu, False, reached=trial.steady_reached)
                    continue
            better = yield from duels.confirmed(run, search, trial)
            if search.record(settings, trial.step_ms if trial.ok else None,
                             trial.data_wait_share, trial.worker_cpu, better,
                             reached=trial.steady_reached):
                result.best = run.stand_in.get(trial.index, trial.index)
                result.save()
            yield len(result.trials), len(result.trials) + search.estimate_left()
        if not climbed:  # the budget or the limit ended the climb: its leader still
            yield from duels.leader_first(run, search)
        yield from duels.side_confirmed(run)
        duels.script_duel_leader(run)
        if search.climb_note():
            result.notes.append(search.climb_note())
        if search.settled:
            result.notes.append(search.settled)
        for what, why in search.skipped:
            result.notes.append(f"{what} not tried: {why}")
        result.busy = load_note(loads, usable_cores(), result.trials)
        return result
    except (KeyboardInterrupt, Cancelled, GeneratorExit) as exc:
        result.stopped = "interrupted" if isinstance(exc, KeyboardInterrupt) else "cancelled"
        result.trials += [t for t in running if t.session]  # kept, marked interrupted
        raise
    finally:
        result.elapsed_s = time.monotonic() - t0
        result.save()


def _run_ahead(run: duels.Runner, search: Search, settings: dict,
               keep: int) -> Job[Trial | None]:
    """The next rung of the climb (Search.ahead's `settings`), run before the last rung's duel;
    None when the trial limit, memory or the budget leave no room for it (the duel then comes
    first)."""
    cfg, result = run.cfg, run.result
    index = len(result.trials) + 1
    room = cfg.max_trials is None or index + 2 * noise.SMALL_GAIN_PAIRS <= cfg.max_trials - keep
    if (not room
            or _memory_check(result, settings, run.limit, max(1, int(cfg.nproc_per_node)))
            or run.deadline - time.monotonic() < 2 * _typical_s(result)):
        return None
    ahead = run.measure(_rung_trial(index, search, settings))
    yield len(result.trials), len(result.trials) + search.estimate_left()
    return ahead


def _rung_trial(index: int, search: Search, settings: dict) -> Trial:
    changes = changes_from(search.script, settings)
    return Trial(index, duels.trial_name(index, changes), settings, changes)


def _unanswered(result: TuneResult, search: Search, settings: dict) -> str:
    """The question a tune that stopped early leaves open, for its note."""
    best = result.best_trial
    if search.stage == "workers" and best is not None:
        label = settings_text(changes_from(search.script, settings)) or "as written"
        return f"whether {label} is faster than {best.label} was not measured"
    beside = settings_text(changes_from(best.settings if best else search.script, settings))
    return f"{beside or 'as written'} was not tried"


def _start_search(result: TuneResult, base: Trial, launch: Launch, cores: int, most: int,
                  min_gain: float) -> Search | None:
    """From the first trial: the DataLoader to tune, its settings as written, the search."""
    if not base.ok:
        if base.status != OVER_BUDGET:
            result.notes.append(f"the script as written ended with {base.status}"
                                + (f": {base.message}" if base.message else ""))
        return None
    s = open_session(base.session)
    loaders = s.loaders()
    if not loaders:
        result.notes.append("the script built no torch DataLoader: nothing to tune")
        return None
    tuned = busiest_loader(loaders)
    result.site = str(tuned.get("site", ""))
    launch.site = result.selector = f"{tuned.get('file')}:{tuned.get('line')}"
    result.settings = tuned.get("settings") or {}
    passed = tuned.get("passed") or {}
    result.passed = {k: passed[k] for k in KEYS if k in passed}
    script = {k: passed.get(k, DEFAULTS[k]) for k in KEYS}
    base.settings = dict(script)
    base.effective = tuned.get("effective") or {}
    if len(loaders) > 1:
        result.notes.append(f"the script builds {len(loaders)} DataLoaders; tuned the one at "
                            f"{result.site} (it served the most batches)")
    epochs = [e for e in s.events if e.get("event") == "epoch"
              and str(e.get("site", "")) == str(tuned.get("site", ""))]
    epoch_steps = None
    if len(epochs) >= SHORT_EPOCHS and base.steps:
        epoch_steps = epoch_length(epochs) or base.steps / len(epochs)
        result.notes.append(f"the script starts its DataLoader anew every {epoch_steps:.0f} "
                            "steps: workers in the climb are kept across epochs "
                            "(persistent_workers=True)")
    return Search(script, cores, bool(s.run.get("cuda_available")), min_gain, most=most,
                  epoch_steps=epoch_steps)


BATCHING_TOLERANCE = 0.01  # steps an epoch that differ by less are the same batching


def per_script_batches(trial: Trial, base: Trial) -> str | None:
    """A trial whose loader cuts an epoch into another number of steps than the script as
    written does another amount of work a step (an IterableDataset sharded over the workers:
    each worker's shard ends in a partial batch; hunt: 100 steps an epoch as written, 112 with
    16 workers, whose per-step figure overstated the gain by 12%). Its step time and data
    wait become per step of the script as written (its time an epoch over the script's steps
    an epoch) and the note says so; None when the steps an epoch agree or are unknown."""
    if trial is base or not trial.ok or trial.batching is not None or not base.epoch_steps \
            or not trial.epoch_steps or trial.step_ms is None:
        return None
    scale = trial.epoch_steps / base.epoch_steps
    if abs(scale - 1) <= BATCHING_TOLERANCE:
        return None
    trial.batching = scale
    trial.step_ms *= scale
    if trial.data_wait_ms is not None:
        trial.data_wait_ms *= scale
    return (f"{trial.label} cuts an epoch into {trial.epoch_steps:.0f} steps where the script "
            f"as written cuts it into {base.epoch_steps:.0f} (its batches split the data "
            "otherwise, e.g. each worker's shard of an IterableDataset ends in a partial "
            "batch): its figures are per step of the script as written, time an epoch over "
            f"{base.epoch_steps:.0f}")


def load_note(loads: list[float], cores: int, trials: list[Trial] | None = None) -> str:
    """A note when other work loaded the machine during the trials: a setting whose steps
    compute (workers, collate, the main process) is slowed by it, one whose steps sleep on
    data hardly, so the speed-up found moves with the load (an I/O-bound pick read 5.7x at
    load 3 and 7.5x at load 0.7). Two measures, either suffices: trials that lost the CPU to
    other work (Trial.busy: others' share of the CPU and the trial's run-queue waits, measured
    over its steady window, core/tune/cpu.py), or the 1-minute load average. That counts the
    trials' own processes too: a CPU-bound trial (at most `cores` workers, the climb stops
    there) and the runner add up to cores + 1, so only a highest load average past
    2 x cores + 1 is other work."""
    top = max(loads, default=0.0)
    busy = [t for t in trials or [] if t.busy]
    plural = "s" if cores != 1 else ""
    if busy:
        others = max(t.others or 0.0 for t in busy)
        steal = max(t.steal or 0.0 for t in busy)
        return (f"busy machine: other work took the CPU from {len(busy)} of "
                f"{len([t for t in trials or [] if t.ok])} trials (it used up to "
                f"{100 * others:.0f}% of the {cores} core{plural}, the trials waited for a CPU "
                f"up to {100 * steal:.0f}% of the time they wanted one; load average up to "
                f"{top:.1f}): the figures hold for that load")
    if top <= 2 * cores + 1:
        return ""
    return (f"other work kept the machine busy during the trials (load average up to {top:.1f} "
            f"on {cores} core{plural}): the figures hold for that load")


def _memory_check(result: TuneResult, settings: dict, limit: int, nproc: int = 1) -> str:
    """Why a trial would not fit in memory ('' when it would, or nothing is known yet)."""
    workers = int(settings.get("num_workers") or 0) * nproc
    measured = [t for t in result.trials if t.worker_private]
    mains = [t.main_private for t in result.trials if t.main_private]
    if workers == 0 or not measured or not mains:
        return ""
    source = max(measured, key=lambda t: t.worker_private or 0)
    per_worker = source.worker_private or 0  # not 0: `measured` holds only measured trials
    main = max(mains)
    if main + workers * per_worker <= GUARD * limit:
        return ""
    return "would run out of memory: " + over_limit_text(
        workers, main, per_worker, limit, f"trial {source.index}")


def _typical_s(result: TuneResult) -> float:
    walls = sorted(t.wall_s for t in result.trials if t.wall_s)
    return walls[len(walls) // 2] if walls else 0.0
