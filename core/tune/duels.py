"""The duels of a tune (core/tune/job.py): a trial against another in alternating pairs
until the gain is beyond the noise or not (core/tune/noise.py). A rung of the climb that beat
the best by a small gain, a setting beside num_workers, and the leader against the script as
written (issue 31: the leader first, before any setting beside num_workers) all go through
`_duel`; the verdict's claim is the last of these."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.tune import noise
from stallscope.core.tune.result import TuneResult
from stallscope.core.tune.search import OBVIOUS_GAIN, Search
from stallscope.core.tune.trial import Launch, Trial, run_trial
from stallscope.core.units import plural


def trial_name(index: int, changes: dict) -> str:
    text = "as-written" if not changes else "_".join(
        f"{k}={v}" for k, v in changes.items() if v is not None)
    return f"{index:02d}-{text}"


@dataclass
class Runner:
    """What running one more trial needs (the job's state, for the duels)."""

    cfg: Any                  # the TuneConfig (core/tune/job.py)
    result: TuneResult
    launch: Launch
    folder: Path
    deadline: float
    limit: int
    cancel: CancelFlag | None
    running: list
    finish: Callable[[Trial], None]
    # a rung kept after a recheck: its first trial read it slower, so a repeat of it (the
    # median pair's) stands in for it as the best and in the first pair against the script
    stand_in: dict[int, int] = field(default_factory=dict)
    # the last duel against the script's own settings that kept nothing: (the setting's
    # trial, its pairs as result.pairs holds them, the decision); see script_duel_leader
    script_duel: tuple[int, list, str] | None = None

    def measure(self, trial: Trial) -> Trial:
        """Run one trial to its end (or the budget's) and record it."""
        self.running.append(trial)
        run_trial(self.launch, trial, self.folder, self.deadline, self.limit, self.cancel)
        self.finish(trial)
        return trial


def duel(run: Runner, slow: Trial, fast: Trial, pairs: list, profiled: bool,
          tag: str, min_pairs: int = noise.MIN_PAIRS, gain: float | None = None,
          recheck: bool = False) -> Job[str]:
    """`slow` (the settings to beat) and `fast` again, in pairs that alternate which goes
    first, until the gain is beyond the noise or not (core/tune/noise.py; a pair under
    OBVIOUS_GAIN asks for SMALL_GAIN_PAIRS of them). `pairs` starts with
    (slow, fast) of the trials already run and gets each repeat; returns noise.ADOPT, NOISE,
    or UNCONFIRMED (the budget, the trial limit or a failed repeat ended it first).
    `recheck`: `fast` read no faster than `slow`, within the noise; `pairs` starts empty and
    the first repeat that agrees ends it (noise.recheck_decide)."""
    cfg, result = run.cfg, run.result
    most = max(cfg.max_pairs, min_pairs)

    def decision() -> str:
        least = cfg.min_gain if gain is None else gain  # every pair's least gain
        ratios = result.pair_ratios(pairs)
        if recheck:
            return noise.recheck_decide(ratios, least, most, OBVIOUS_GAIN)
        return noise.decide(ratios, least, most, min_pairs, OBVIOUS_GAIN)

    while decision() == noise.MORE:
        if len(pairs) >= most:
            break
        why_not = ""
        if run.deadline - time.monotonic() < 1.2 * ((slow.wall_s or 0) + (fast.wall_s or 0)):
            why_not = f"the time budget ({cfg.budget_s:.0f} s) ran out"
        elif cfg.max_trials is not None and len(result.trials) + 2 > cfg.max_trials:
            why_not = f"the limit of {cfg.max_trials} trials left no room"
        if why_not:
            done = len(pairs)
            result.stopped = "budget" if "budget" in why_not else "trial limit"
            result.notes.append(
                f"{why_not} " + (f"before {fast.label} was measured again against "
                                 f"{slow.label}" if done == 0 else
                                 f"before {fast.label} was repeated against {slow.label}"
                                 if done == 1 else
                                 f"after {done} pairs of {fast.label} against {slow.label} "
                                 f"({result.interval_of(pairs, recheck)}; "
                                 "they straddle the bar)")
                + ": its gain is not confirmed")
            return noise.UNCONFIRMED
        order = (fast, slow) if len(pairs) % 2 else (slow, fast)
        pair = {}
        for which in order:
            index = len(result.trials) + 1
            name = f"{trial_name(index, which.changes)}-{tag}{len(pairs) + 1}"
            pair[which.index] = run.measure(Trial(index, name, dict(which.settings),
                                                  dict(which.changes), profiled=profiled))
        s, f = pair[slow.index], pair[fast.index]
        if not (s.ok and f.ok):
            result.notes.append(f"a repeat of {fast.label} against {slow.label} failed "
                                f"({f.status}, {s.status}): its gain is not confirmed")
            return noise.UNCONFIRMED
        pairs.append((s.index, f.index))
        yield len(result.trials), len(result.trials) + 2
    return noise.UNCONFIRMED if decision() == noise.MORE else decision()


def confirmed(run: Runner, search: Search, trial: Trial) -> Job[bool | None]:
    """Whether a trial that beat the best really did, when search.duel_pairs asks (a rung's
    gain under OBVIOUS_GAIN, any gain of a setting beside num_workers): a duel of
    back-to-back pairs. None when no duel was needed. After a duel the winner's reference is
    the median of its repeats (search.rebase), so a later trial is not measured against one
    lucky or unlucky figure."""
    result = run.result
    best = result.best_trial
    step = trial.step_ms if trial.ok else None
    recheck = search.recheck(step, trial.busy or (best is not None and best.busy))
    min_pairs = search.duel_pairs(step, trial.steady_reached)
    if best is None or (min_pairs is None and not recheck):
        return None
    # the first pair: the best's latest measurement (a repeat of it when the pairs against the
    # script ran), not a first trial that may have read lucky
    best = max((t for t in result.trials if t.ok and t.step_ms and t.settings == best.settings
                and t.index != trial.index), key=lambda t: t.index, default=best)
    # a rung that read no faster within the noise: measured again from scratch, its first
    # trial left out (the one that read it slower)
    pairs = [] if recheck else [(best.index, trial.index)]
    decision = yield from duel(run, best, trial, pairs, False, "check",
                                min_pairs or noise.MIN_PAIRS, search.bar, recheck)
    measured = result.interval_of(pairs, recheck)
    first = search.gain(step) if recheck else None
    if recheck:  # the first trial read it slower: said beside its repeats
        measured = (f"first {first:.2f}x, measured again {measured}" if first else measured
                    ).replace(" (not repeated)", "")
    if decision == noise.NOISE and search.stage == "workers":
        more, fewer = (int(t.settings.get("num_workers") or 0) for t in (trial, best))
        ratios = result.pair_ratios(pairs)
        readings = ratios + ([first] if first else [])
        if ratios and min(readings) > 1:  # faster every time, by less than a rung must gain
            result.notes.append(f"{plural(more, 'worker')} measured faster than {fewer} by less "
                                f"than the {100 * search.bar:.0f}% a rung must gain "
                                f"({measured}): keeping {fewer}")
        else:
            result.notes.append(f"{plural(more, 'worker')} measured no faster than {fewer} "
                                f"(within noise: {measured}): keeping {fewer}")
    else:
        result.notes.append(f"{trial.label} against {best.label}: {measured}"
                            + (": kept" if decision == noise.ADOPT else
                               f": {decision}, not kept"))
    _keep_script_duel(run, best, trial, pairs, recheck, decision)
    side = 1 if decision == noise.ADOPT else 0
    if recheck and decision == noise.ADOPT:
        run.stand_in[trial.index] = pairs[noise.median_index(result.pair_ratios(pairs))][1]
    trials = [result.trial(p[side]) for p in pairs]
    steps = [t.step_ms for t in trials if t is not None and t.step_ms]
    if steps:  # no repeat ran when the budget ended a recheck first
        search.rebase(float(np.median(steps)), decision == noise.ADOPT)
    return decision == noise.ADOPT


def _keep_script_duel(run: Runner, best: Trial, trial: Trial, pairs: list, recheck: bool,
                      decision: str) -> None:
    """A duel whose slow side ran the script's own settings is a setting against the script as
    written: when it kept nothing, its pairs are kept for script_duel_leader. A recheck's
    pairs start with the search's own pair (the one that read the setting slower), as
    result.pairs does."""
    base = run.result.baseline_trial
    if (decision == noise.ADOPT or base is None or best.settings != base.settings
            or not run.result.measured_pairs(pairs)):
        return
    first = [(best.index, trial.index)] if recheck else []
    run.script_duel = (trial.index, first + list(pairs), decision)


def script_duel_leader(run: Runner) -> None:
    """The search is over and no leader met the script as written, but a duel of the search
    did (a rung or a setting that read no faster than the script's settings, within the
    noise, or whose pairs the budget cut): that setting is the tune's leader and those pairs
    its pairs, so the verdict and tune.json say what they showed. Without it the verdict said
    "nothing tried was at least 5% faster" and tune.json held no pairs, beside a note on 3
    pairs that read 0.80-1.48x (hunt item 5)."""
    result = run.result
    if result.leader is not None or run.script_duel is None:
        return
    leader, pairs, decision = run.script_duel
    result.leader, result.pairs, result.decision = leader, list(pairs), decision


def against_script(run: Runner) -> Job[None]:
    """The script as written against the leader, beyond the noise or not; within noise the
    script's settings are kept (result.best = the baseline). The repeats record a window:
    the claim's two sessions open in the compare view."""
    result = run.result
    base, leader = result.baseline_trial, result.trial(result.leader)
    assert base is not None and leader is not None  # the search ran both before the pairs
    decision = yield from duel(run, base, leader, result.pairs, True, "pair")
    result.decision = busy_check(result, decision, run.cfg.min_gain)
    result.best = result.leader if result.decision == noise.ADOPT else base.index


def busy_check(result: TuneResult, decision: str, min_gain: float) -> str:
    """A gain the pairs showed on a busy machine (most of their trials lost the CPU to other
    work, core/tune/cpu.py) stands only beyond the noise the tune's repeats measured
    (noise.busy_decision); else the verdict is "busy machine", said in a note."""
    measured = result.measured_pairs(result.pairs)
    trials = [t for _, b, lead in measured for t in (b, lead)]
    busy = bool(trials) and 2 * sum(t.busy for t in trials) >= len(trials)
    ratios = result.pair_ratios(result.pairs)
    spread = measured_noise(result)
    out = noise.busy_decision(decision, ratios, busy, spread, min_gain)
    if out == noise.BUSY:
        lead = result.trial(result.leader)
        others = max((t.others or 0.0) for t in trials)
        steal = max((t.steal or 0.0) for t in trials)
        result.notes.append(
            f"busy machine: other work used up to {100 * others:.0f}% of the CPU during the "
            f"pairs and their trials waited for a CPU up to {100 * steal:.0f}% of the time; "
            f"{lead.label if lead else 'the leader'} measured "
            f"{result.leader_interval}, within the {100 * spread:.0f}% that repeats of "
            "one setting moved: not kept (tune again on a quieter machine)")
    return out


def leader_first(run: Runner, search: Search) -> Job[bool]:
    """The climb is over (or the budget ended it): its leader against the script as written,
    in alternating pairs, before any setting beside num_workers is tried (issue 31: budgets
    went to persistent_workers and prefetch_factor and the leader stayed unconfirmed).
    False when the leader was not confirmed: the search stops there."""
    result = run.result
    if search.stage == "workers":  # cut short: the fewest workers within noise all the same
        search.settle()
    _sync_best(result, search)
    base, leader = result.baseline_trial, result.best_trial
    if base is None or leader is None or leader.index == base.index:
        return True  # nothing beat the script as written: settings around it may
    result.leader, result.pairs = leader.index, [(base.index, leader.index)]
    yield from against_script(run)
    if result.decision == noise.ADOPT:
        # the settings beside it are measured against the median of its repeats, not its
        # first trial (an I/O-bound leader read 11.3 ms once, 15.1 ms in its pair)
        measured = result.measured_pairs(result.pairs)
        repeats = [m for m in measured if m[0] > 0] or measured  # as the claim's median
        search.rebase(float(np.median([t.step_ms for _, _, t in repeats])), False)
        return True
    search.give_up(f"{leader.label} was not confirmed against the script as written")
    return False


def side_confirmed(run: Runner) -> Job[None]:
    """A setting beside num_workers won its duel against the confirmed leader (or against the
    script as written): the claim is then that setting against the script as written. When
    those pairs do not confirm it, the confirmed leader stays, said in a note."""
    result = run.result
    base, best = result.baseline_trial, result.best_trial
    if base is None or best is None or best.index in (base.index, result.leader):
        return
    before = (result.leader, list(result.pairs), result.decision)
    kept = result.trial(result.leader) if result.decision == noise.ADOPT else None
    result.leader, result.pairs = best.index, [(base.index, best.index)]
    yield from against_script(run)
    if result.decision != noise.ADOPT and kept is not None:
        result.notes.append(f"{best.label} beat {kept.label} in its duel but was "
                            f"{result.decision} against the script as written "
                            f"({result.leader_interval}): keeping {kept.label}")
        result.leader, result.pairs, result.decision = before
        result.best = kept.index


def _sync_best(result: TuneResult, search: Search) -> None:
    """result.best follows search.best when the search changed it (settle): the search's own
    trial of those settings (not a repeat)."""
    if search.best is None:
        return
    best = result.best_trial
    if best is not None and best.settings == search.best.settings:
        return
    match = next((t for t in result.trials if t.ok and t.settings == search.best.settings),
                 None)
    if match is not None:
        result.best = match.index


def measured_noise(result: TuneResult) -> float:
    """The spread of the repeated trials of one setting so far (noise.spread)."""
    groups: dict[str, list[float]] = {}
    for t in result.trials:
        if t.ok and t.step_ms:
            groups.setdefault(repr(sorted(t.settings.items())), []).append(t.step_ms)
    return noise.spread(list(groups.values()))
