"""Which DataLoader settings to try next: a short search, not a grid.

1. num_workers up a ladder (0, 1, 2, 4, 8 ... up to the usable cores) from the script's own
   value. A rung counts as better when its steady step time beats the best so far by at least
   `min_gain`; the climb stops after two rungs in a row that are not better, when steps hardly
   wait for data any more (< `DONE_SHARE` of step time), at a failed trial, or at the top.
2. Past the cores when the workers wait: at the top rung (within the patience), its steps
   still waiting for data (>= `LARGE_WAIT`) and its workers on a CPU less than half their
   wall time (core/tune/cpu.py: they sleep on I/O, so more of them than cores still help),
   the ladder goes on doubling up to `most` workers (memory bounds it too: core/tune/job.py
   skips a trial that would not fit); each such rung costs a trial of many workers, so one
   that is not better ends the climb. Workers on a CPU: one rung past the cores all the same
   (the main process and the workers take turns on the cores: 4 workers beat 2 on 2 cores by
   12.9% in the previous round's benchmark), and no further. `climb` says which case it was.
   With short epochs (`epoch_steps`) the rungs keep their workers across epochs.
   A rung whose gain is small, or whose trial ended before steady state, counts only when
   alternating pairs against the best all show it (`duel_pairs`); one such duel that does
   not is "no faster than <fewer> (within noise)". Before a small gain's duel the next rung
   is measured (`ahead`): when it beats the best beyond doubt, the duel is moot. A rung not
   better, but within the noise of the best, whose miss would end the climb is measured
   again in alternating pairs against the best first (`recheck`): a single slow trial under
   load does not end it. When the climb ends, the fewest workers within the noise of the
   best are kept (`settle`): a rung no faster than a smaller one beyond the measured noise
   (`noise`, the spread of repeated trials of one setting, at least the bar) costs memory
   for nothing. core/tune/job.py then confirms that leader
   against the script as written before anything else is tried.
3. Around the best, while steps still wait for data (a setting of the DataLoader cannot speed
   up steps that do not wait for it): pin_memory (only with a CUDA device: it does nothing
   without one), persistent_workers, then a deeper prefetch_factor; each kept only when it
   is better beyond the noise (`duel_pairs`: alternating pairs against the best without it,
   each showing at least SECONDARY_GAIN).

The search knows nothing of processes: `next()` names the settings to try, `record()` takes the
outcome (None for a trial that failed), `best` is what is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stallscope.core.tune import noise
from stallscope.core.tune.cpu import BUSY_SHARE
from stallscope.core.units import plural

MIN_GAIN = 0.05     # a trial counts as better when at least 5% faster than the best so far
OBVIOUS_GAIN = 0.3   # a smaller gain is repeated against the best before it counts (job.py):
#                     single trials of 8-10 ms steps varied by 25% on a loaded 2-core machine
DONE_SHARE = 0.05   # steps waiting for data less than this share: more workers cannot help
LARGE_WAIT = 0.2    # steps waiting this share or more: worth going past the cores (I/O)
SECONDARY_GAIN = 0.1  # a setting beside num_workers must win this much, in every pair: pairs of
#                      the same settings at 7 ms steps on 2 shared cores read 5.7-6.5x, 6.6-7.1x
#                      (6-10% apart), and two tunes kept prefetch_factor=4 for 1.06-1.12x or not
BUSY_BAND = 1.0     # a rung read up to this much slower on a busy machine is measured again:
#                     there single trials of one setting read 5.6-12.8 ms (io, 8 workers, load
#                     7-10) and 16.3 ms once against 9.4 ms in plain runs (IterableDataset)
PATIENCE = 2        # rungs in a row that are not better end the climb (past the cores: one)
MOST_WORKERS = 16   # default top of the ladder when workers wait on I/O (and the cores < it)


def most_workers_default(cores: int) -> int:
    """The default most workers a tune tries (the CLI's and the tune dialog's): past the
    cores only when the workers turn out to wait on I/O (BUSY_SHARE)."""
    return max(MOST_WORKERS, cores)


def ladder(cores: int, start: int = 0) -> list[int]:
    """0, 1, 2, 4, 8 ... up to `cores` (at least 1), and `start` itself; from `start` up."""
    top = max(1, cores)
    rungs = {0, 1}
    n = 2
    while n <= top:
        rungs.add(n)
        n *= 2
    rungs.add(top)
    return sorted(r for r in rungs | {start} if r >= start)


@dataclass
class Outcome:
    settings: dict
    step_ms: float | None        # None: the trial failed (crash, memory, budget)
    data_wait_share: float | None = None
    worker_cpu: float | None = None  # workers' share of their wall time on a CPU
    reached: bool = True         # False: the trial ended before steady state
    rung: bool = False           # a trial of the climb (num_workers only)
    dueled: bool = False         # became the best by a duel of alternating pairs

    @property
    def workers(self) -> int:
        return int(self.settings.get("num_workers") or 0)


@dataclass
class Search:
    """The search state. `script` is the four settings as the script builds its DataLoader."""

    script: dict
    cores: int
    cuda: bool = False
    min_gain: float = MIN_GAIN
    most: int | None = None      # the most workers ever tried (most_workers_default)
    # Steps per epoch when the script iterates its DataLoader anew every few steps: workers
    # then start over each epoch (the demo: 8 steps an epoch), so the climb keeps them
    # (persistent_workers=True); else None.
    epoch_steps: float | None = None
    best: Outcome | None = None
    climb: str = ""              # why the climb stopped where it did, past the cores or not
    noise: float = 0.0           # spread of repeated trials of one setting (job.py measures it)
    settled: str = ""            # "16 workers measured no faster than 2 (within noise): ..."
    stage: str = "baseline"
    history: list[Outcome] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (what, why) never tried
    _rungs: list[int] = field(default_factory=list)
    _misses: int = 0
    _around: list[str] = field(default_factory=list)
    _rebased: float | None = None

    def __post_init__(self) -> None:
        self.script = {k: self.script.get(k) for k in
                       ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")}
        self.script["num_workers"] = int(self.script["num_workers"] or 0)
        self.most = max(1, self.most or most_workers_default(self.cores))
        self._rungs = ladder(min(self.cores, self.most), self.script["num_workers"])[1:]
        self._past_cores = False

    # -- what to try
    def next(self) -> dict | None:
        """The full settings of the next trial, or None when the search is over."""
        if self.stage == "baseline":
            return dict(self.script)
        if self.stage == "workers":
            if self._rungs:
                return self.with_workers(self._rungs[0])
            self.settle()
            self._enter_around()
        while self.stage == "around" and self._around:
            candidate = self._candidate(self._around[0])
            if candidate is not None:
                return candidate
            self._around.pop(0)
        self.stage = "done"
        return None

    def estimate_left(self) -> int:
        """Trials still to come at most (for a progress bar)."""
        if self.stage == "baseline":
            return 1 + len(self._rungs) + 3
        if self.stage == "workers":
            return len(self._rungs) + 3
        return len(self._around) if self.stage == "around" else 0

    def with_workers(self, n: int) -> dict:
        base = dict(self.best.settings if self.best else self.script)
        base["num_workers"] = n
        if n == 0:
            base["persistent_workers"], base["prefetch_factor"] = False, None
        elif self.epoch_steps is not None:  # short epochs: workers that start once
            base["persistent_workers"] = True
        return base

    def _candidate(self, key: str) -> dict | None:
        assert self.best is not None  # the "around" stage follows a baseline that ran
        best = dict(self.best.settings)
        if key == "pin_memory":
            if best.get("pin_memory"):
                return None
            best["pin_memory"] = True
        elif key == "persistent_workers":
            if best.get("persistent_workers"):
                return None
            best["persistent_workers"] = True
        elif key == "prefetch_factor":
            best["prefetch_factor"] = 2 * int(best.get("prefetch_factor") or 2)
        return best

    def climb_note(self) -> str:
        """Which case the climb was, with the most workers it tried past the cores."""
        if not self._past_cores:
            return self.climb
        tried = max(int(o.settings["num_workers"]) for o in self.history)
        assert self.most is not None  # set by __post_init__
        return f"{self.climb}; tried up to {tried}" + (" (the limit)" if tried >= self.most
                                                        else "")

    def _beyond_cores(self, top: Outcome) -> None:
        """At the top rung of the ladder, still the best: go on past the cores when its
        workers wait on I/O and its steps still wait for data; say which case it was."""
        workers = int(top.settings["num_workers"])
        cpu, share = top.worker_cpu, top.data_wait_share or 0.0
        if self._past_cores or workers < self.cores or cpu is None:
            return
        assert self.most is not None  # set by __post_init__
        if cpu >= BUSY_SHARE:
            bound = (f"workers are on a CPU {100 * cpu:.0f}% of the time they could run "
                     "(CPU-bound)")
            if workers >= self.most:
                self.climb = f"{bound}: stopped at the limit of {plural(self.most, 'worker')}"
                return
            self._rungs = [n for n in ladder(self.most) if n > workers][:1]
            self._past_cores = True
            self.climb = f"{bound}: tried one rung past the {plural(self.cores, 'core')}"
            return
        waits = f"workers wait on I/O {100 * (1 - cpu):.0f}% of the time"
        if share < LARGE_WAIT:
            return
        if workers >= self.most:
            self.climb = f"{waits}, but the limit is {plural(self.most, 'worker')}"
            return
        self._rungs = [n for n in ladder(self.most) if n > workers]
        self._past_cores = True
        self.climb = (f"{waits} and steps still wait for data {100 * share:.0f}% of theirs: "
                      f"tried past the {plural(self.cores, 'core')}")

    def settle(self) -> None:
        """The climb is over: among the rungs within the noise of the best (fewer workers,
        a step time at most (1 + band) x the best's), keep the fewest workers. A best that won
        its place in a duel of pairs stays: the pairs measured it better than the rung below."""
        best = self.best
        if best is None or not best.rung or best.dueled or not best.step_ms:
            return
        smaller = [o for o in self.history if o.rung and o.step_ms and o.workers < best.workers
                   and o.settings == {**best.settings, "num_workers": o.workers}]
        band = max(self.bar, self.noise)
        within = [o for o in smaller if o.step_ms and o.step_ms <= best.step_ms * (1 + band)]
        if not within:
            return
        pick = min(within, key=lambda o: o.workers)
        self.settled = (f"{plural(best.workers, 'worker')} measured no faster than "
                        f"{pick.workers} (within noise: {best.step_ms:.1f} vs "
                        f"{pick.step_ms:.1f} ms per step, noise {100 * band:.0f}%): keeping "
                        f"{pick.workers}")
        self.best = pick

    def _enter_around(self) -> None:
        self.stage = "around"
        workers = int(self.best.settings["num_workers"]) if self.best else 0
        self._around = []
        share = self.best.data_wait_share if self.best else None
        if share is not None and share < DONE_SHARE:
            self.skipped.append(("pin_memory, persistent_workers, prefetch_factor",
                                 f"steps wait for data only {100 * share:.0f}% of the time"))
            return
        if self.cuda:
            self._around.append("pin_memory")
        elif not self.script.get("pin_memory"):
            self.skipped.append(("pin_memory=True", "no CUDA device: pinned memory does nothing"))
        if workers > 0:
            self._around += ["persistent_workers", "prefetch_factor"]
        else:
            self.skipped.append(("persistent_workers, prefetch_factor",
                                 "they need worker processes and none were better"))

    def give_up(self, why: str) -> None:
        """End the search before the settings still to come around the best (say why)."""
        if self.stage == "around" and self._around:
            self.skipped.append((", ".join(self._around), why))
        self._around, self._rungs, self.stage = [], [], "done"

    # -- what happened
    def gain(self, step_ms: float | None) -> float | None:
        """The best step time so far over this one (None when either is unknown)."""
        if step_ms is None or self.best is None or self.best.step_ms is None or not step_ms:
            return None
        return self.best.step_ms / step_ms

    @property
    def bar(self) -> float:
        """The least gain that counts now: min_gain for a rung of the climb, SECONDARY_GAIN
        (when larger) for a setting beside num_workers (a duel's pairs must all show it)."""
        return max(self.min_gain, SECONDARY_GAIN) if self.stage == "around" else self.min_gain

    def duel_pairs(self, step_ms: float | None, reached: bool = True) -> int | None:
        """How many back-to-back pairs against the best must show the gain of a trial at
        `step_ms` before it counts (core/tune/job.py runs them); None: no duel (not better,
        or a rung of the climb beating the best by far). A setting beside num_workers
        (the "around" stage) is always checked, by the main verdict's rule (noise.decide:
        two pairs when every one is an obvious gain, else three): on 8 ms steps a single
        trial of persistent_workers read 26% faster and its repeat 15% slower, and two tunes
        kept different settings. A trial that ended before steady state is checked so too,
        however large its gain (issue 31: single trials short of steady state read 3.9-22x
        for 16 workers, no faster than 2 in plain reruns). The machine's load does not enter
        here: the same trials take the same path at any load (the rungs that read slower
        are measured again, `recheck`; the verdict weighs a busy machine, duels.busy_check)."""
        gain = self.gain(step_ms)
        if gain is None or gain < 1 + self.bar:
            return None
        if self.stage == "around" or not reached:
            return noise.MIN_PAIRS
        return noise.SMALL_GAIN_PAIRS if gain < 1 + OBVIOUS_GAIN else None

    def ahead(self, step_ms: float | None, data_wait_share: float | None,
              reached: bool = True) -> dict | None:
        """The next rung's settings when it is worth measuring before the duel a rung's small
        gain asks for (core/tune/job.py): should that next rung beat the best beyond doubt
        (`beyond_doubt`), the smaller rung's duel is moot (the demo and an IterableDataset
        script spent 4 of their ~15 trials confirming 1 worker at 1.1-1.2x when 2 workers
        read 1.7-2x). None when the duel decides where the climb goes: the last rung, a miss
        that would end the climb, or steps that would no longer wait for data."""
        if (self.stage != "workers" or len(self._rungs) < 2
                or self.duel_pairs(step_ms, reached) != noise.SMALL_GAIN_PAIRS
                or self._misses + 1 >= self.patience
                or data_wait_share is None or data_wait_share < DONE_SHARE):
            return None
        return self.with_workers(self._rungs[1])

    def beyond_doubt(self, step_ms: float | None, reached: bool = True) -> bool:
        """A rung beats the best by OBVIOUS_GAIN at steady state: it needs no duel."""
        gain = self.gain(step_ms)
        return self.stage == "workers" and reached and gain is not None and (
            gain >= 1 + OBVIOUS_GAIN)

    @property
    def patience(self) -> int:
        """Rungs in a row that are not better before the climb ends (past the cores: one)."""
        return 1 if self._past_cores else PATIENCE

    def recheck(self, step_ms: float | None, busy: bool = False) -> bool:
        """Whether a rung that did not beat the best is measured again before it counts as a
        miss: when this miss would end the climb and its figure is within the noise of the
        best (slower by at most the band: the noise measured so far, at least the bar; before
        any repeat, OBVIOUS_GAIN, the spread of single trials on a loaded 2-core machine; on a
        busy machine, `busy`, at least BUSY_BAND). Under load single trials misled the climb
        (issue 31: an I/O-bound tune stopped at 4 workers on one slow trial, 73% behind the
        grid's best)."""
        gain = self.gain(step_ms)
        if self.stage != "workers" or gain is None or gain >= 1 + self.bar:
            return False
        band = max(self.bar, self.noise) if self.noise > 0 else OBVIOUS_GAIN
        if busy:
            band = max(band, BUSY_BAND)
        return gain * (1 + band) >= 1 and self._misses + 1 >= self.patience

    def rebase(self, step_ms: float, for_next: bool) -> None:
        """A duel measured the best again (`for_next`: the coming record() takes its place,
        so the figure is kept for it): its step time is that median from now on."""
        if for_next:
            self._rebased = step_ms
        elif self.best is not None:
            self.best.step_ms = step_ms

    def record(self, settings: dict, step_ms: float | None,
               data_wait_share: float | None = None, worker_cpu: float | None = None,
               better: bool | None = None, reached: bool = True) -> bool:
        """Take a trial's outcome; returns whether it became the best. `better` overrides
        the comparison with the best so far (a duel decided it, core/tune/job.py);
        `reached`: the trial's steady window was reached (else its figure is less sure)."""
        if better and self._rebased is not None:
            step_ms = self._rebased
        self._rebased = None
        outcome = Outcome(dict(settings), step_ms, data_wait_share, worker_cpu, reached,
                          rung=self.stage == "workers", dueled=better is not None)
        self.history.append(outcome)
        if better is None:
            better = step_ms is not None and (
                self.best is None or self.best.step_ms is None
                or self.best.step_ms >= step_ms * (1 + self.bar))  # gain >= 1 + bar
        better = bool(better and step_ms is not None)
        if better:
            self.best = outcome
        if self.stage == "baseline":
            self.stage = "workers"
            if step_ms is None:
                self.stage = "done"  # the script as written fails: nothing to compare with
            elif data_wait_share is not None and data_wait_share < DONE_SHARE:
                self.skipped.append(("more num_workers", f"steps wait for data only "
                                     f"{100 * data_wait_share:.0f}% of the time"))
                self._rungs = []
        elif self.stage == "workers":
            self._rungs.pop(0)
            self._misses = 0 if better else self._misses + 1
            best_share = self.best.data_wait_share if self.best else None
            if step_ms is None:
                self._rungs = []  # more workers would fail the same way
            elif self._misses >= self.patience:
                self._rungs = []
            elif best_share is not None and best_share < DONE_SHARE:
                self._rungs = []
            elif not self._rungs:
                self._beyond_cores(outcome)
        elif self.stage == "around" and self._around:
            self._around.pop(0)
        return better
