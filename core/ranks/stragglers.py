"""Stragglers: per step, which rank reached each collective last, and how long the others waited.

Definitions (µs on the traces' own clocks; ranks of one job write wall-clock time, so the clocks of
one host agree and those of several hosts agree to their NTP/PTP accuracy):

- A rank's *device* is its GPU with the most communication time (nccl*/rccl* kernels), else its
  busiest GPU. Its *collectives in step s* are the communication kernels of non-zero duration on
  that device that start inside the step's window [start, end) (the CPU `ProfilerStep#N`), in start
  order; the k-th of each rank form collective (s, k). Steps are matched by name; only steps every
  compared rank has are used, and only k below the smallest count of that step (a note says when
  the counts differ).
- The *arrival* a(r, s, k) of rank r at collective (s, k) is when its compute before the collective
  ended: the latest end among the non-communication GPU ops on its device that started before the
  collective's kernel started, but no later than that start (work still running beside the
  collective does not hold it back). With no such op, the kernel's start.
- The *last rank* L(s, k) is the rank with the latest arrival (the first in rank order on a tie).
  Every rank r waited w(r, s, k) = a(L) - a(r) for it (0 for L itself). When every rank arrived
  at the same instant nobody waited, and the collective has no last rank.
- Per rank: `waited_us` = sum of w(r, s, k) over the collectives; `last_count` = how often it was
  L; `held_up_us` = sum, over the collectives where it was L, of the mean wait of the other ranks.
  The rank table sorts by `held_up_us`, largest first.
- The *slowest rank* is the one with the largest `held_up_us` (> 0). The *cause of its extra time*
  compares it, over the compared steps, with the median of the other ranks: for each idle cause,
  sum over steps of (its idle in that cause - the others' median), and likewise for compute
  (non-communication GPU busy time); the largest positive excess names the cause.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stallscope.core import causes, units
from stallscope.core.causes import CAUSES
from stallscope.core.ranks.tasks import RankSummary

COMPUTE = "compute"  # the cause name for "longer compute" beside the idle causes


@dataclass
class CollectiveRow:
    step: str
    index: int
    name: str
    last: str | None          # the last rank's key (label); None when all arrived together
    wait_max_us: float        # the earliest rank's wait
    wait_mean_us: float       # mean wait of the other ranks

    def to_json(self) -> dict:
        return {"step": self.step, "index": self.index, "name": self.name, "last": self.last,
                "wait_max_us": self.wait_max_us, "wait_mean_us": self.wait_mean_us}


@dataclass
class RankRowFigures:
    key: str
    waited_us: float = 0.0
    held_up_us: float = 0.0
    last_count: int = 0

    def to_json(self) -> dict:
        return {"waited_us": self.waited_us, "held_up_us": self.held_up_us,
                "last_count": self.last_count}


@dataclass
class Slowest:
    key: str
    held_up_us: float
    last_count: int
    collectives: int
    steps: int
    cause: str | None               # an idle cause, "compute", or None when nothing stands out
    cause_extra_us: float           # summed over the compared steps
    excess_us: dict[str, float] = field(default_factory=dict)

    @property
    def text(self) -> str:
        per_step = self.held_up_us / max(self.steps, 1)
        head = (f"{self.key}, last to reach {self.last_count} of "
                f"{self.collectives} collectives; the others waited {units.duration(per_step)} "
                f"per step for it on average")
        if self.cause is None:
            return head + "; its step figures do not show where the extra time went"
        what = "longer compute" if self.cause == COMPUTE else causes.label(self.cause)
        extra = units.duration(self.cause_extra_us / max(self.steps, 1))
        return head + f"; its extra time: {what} (+{extra} per step vs the median rank)"

    def to_json(self) -> dict:
        return {"rank": self.key, "held_up_us": self.held_up_us, "last_count": self.last_count,
                "collectives": self.collectives, "steps": self.steps, "cause": self.cause,
                "cause_extra_us": self.cause_extra_us, "excess_us": self.excess_us,
                "text": self.text}


@dataclass
class Stragglers:
    ranks: dict[str, RankRowFigures]        # every summary, compared or not, by key
    collectives: list[CollectiveRow]
    steps: list[str]
    slowest: Slowest | None
    notes: list[str] = field(default_factory=list)

    def order(self) -> list[str]:
        """Rank keys, the ones that held the others up longest first."""
        return sorted(self.ranks, key=lambda k: (-self.ranks[k].held_up_us,
                                                 -self.ranks[k].last_count))

    def to_json(self) -> dict:
        return {"steps": self.steps,
                "ranks": {k: self.ranks[k].to_json() for k in self.order()},
                "collectives": [c.to_json() for c in self.collectives],
                "slowest": None if self.slowest is None else self.slowest.to_json(),
                "notes": self.notes}


def stragglers(summaries: list[RankSummary]) -> Stragglers:
    ranks = {s.key: RankRowFigures(s.key) for s in summaries}
    out = Stragglers(ranks=ranks, collectives=[], steps=[], slowest=None)
    compared = [s for s in summaries if any(st.collectives for st in s.steps)]
    if len(compared) < 2:
        out.notes.append("fewer than two ranks with collectives: nothing to compare")
        return out
    lacking = [s.key for s in summaries if s not in compared]
    if lacking:
        out.notes.append(f"no collectives in {', '.join(lacking)}: left out of the comparison")
    by_name = [{st.name: st for st in s.steps} for s in compared]
    common = [st.name for st in compared[0].steps if all(st.name in b for b in by_name)]
    if not common:
        out.notes.append("the ranks share no step (ProfilerStep#N): nothing to compare")
        return out
    out.steps = common
    keys = [s.key for s in compared]
    for name in common:
        steps = [b[name] for b in by_name]
        counts = [len(st.collectives) for st in steps]
        n = min(counts)
        if n != max(counts):
            out.notes.append(f"{name}: the ranks have {min(counts)} to {max(counts)} collectives;"
                             f" the first {n} are compared")
        for k in range(n):
            arrivals = np.array([st.collectives[k].compute_end_us for st in steps])
            last = int(np.argmax(arrivals))
            waits = arrivals[last] - arrivals
            others = np.delete(waits, last)
            for key, w in zip(keys, waits, strict=True):
                ranks[key].waited_us += float(w)
            tie = others.max() <= 0
            if not tie:
                ranks[keys[last]].held_up_us += float(others.mean())
                ranks[keys[last]].last_count += 1
            out.collectives.append(CollectiveRow(
                step=name, index=k, name=steps[last].collectives[k].name,
                last=None if tie else keys[last], wait_max_us=float(others.max()),
                wait_mean_us=float(others.mean())))
    worst = max(keys, key=lambda key: (ranks[key].held_up_us, -keys.index(key)))
    if ranks[worst].held_up_us > 0:
        out.slowest = _slowest(worst, compared, by_name, common, ranks[worst], len(out.collectives))
    return out


def _slowest(key: str, compared: list[RankSummary], by_name: list[dict], common: list[str],
             fig: RankRowFigures, n_collectives: int) -> Slowest:
    me = [s.key for s in compared].index(key)
    excess = {c: 0.0 for c in (COMPUTE, *CAUSES)}
    for name in common:
        mine = by_name[me][name]
        others = [b[name] for i, b in enumerate(by_name) if i != me]
        excess[COMPUTE] += mine.compute_us - float(np.median([o.compute_us for o in others]))
        for c in CAUSES:
            theirs = float(np.median([o.idle_by_cause.get(c, 0.0) for o in others]))
            excess[c] += mine.idle_by_cause.get(c, 0.0) - theirs
    cause = max(excess, key=lambda c: excess[c])
    extra = excess[cause]
    return Slowest(key=key, held_up_us=fig.held_up_us, last_count=fig.last_count,
                   collectives=n_collectives, steps=len(common),
                   cause=cause if extra > 0 else None, cause_extra_us=max(extra, 0.0),
                   excess_us=excess)
