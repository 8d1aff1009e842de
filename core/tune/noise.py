"""Is the leader really faster than the script as written? Alternating pairs (issue 21).

One trial of each is not enough: on a shared machine the same settings measured 59 to 278 ms
per step in different runs. So once the search has a leader, the script as written and the
leader run again in pairs, alternating which goes first (drift in the machine's load hits both
sides of a pair alike). Each pair gives a ratio (as-written step / leader step). The leader is
adopted when every pair shows a gain of at least `min_gain` (the interval [lowest, highest]
lies above 1 + min_gain); it is "within noise" when no pair does or when `MAX_PAIRS` pairs
still straddle the threshold; the script's settings are kept then. The same duel guards the
search itself (core/tune/job.py): a trial that beats the best so far by less than
OBVIOUS_GAIN (core/tune/search.py) counts only when `SMALL_GAIN_PAIRS` back-to-back pairs all
show the gain; so does the final claim when one of its pairs is under that.

The claim is the repeated pair with the median ratio (the lower middle one for an even
count), so the two sessions tune.json names give that very ratio in `compare` and the compare
view. The first pair (the search's own trials, run apart in time and without a trace) counts
for the decision and the interval, not for the claim, when repeats exist.
"""

from __future__ import annotations

ADOPT, NOISE, MORE = "adopt", "within noise", "more"
UNCONFIRMED = "not confirmed"  # the budget or a failed repeat ended the pairs first
BUSY = "busy machine"  # pairs that showed a gain, but other work took the CPU from them and
#                        the gain is within the noise their repeats measured (busy_decision)
MIN_PAIRS = 2
SMALL_GAIN_PAIRS = 3  # a small gain during the search (core/tune/job.py) needs every pair of 3
MAX_PAIRS = 3


def decide(ratios: list[float], min_gain: float, max_pairs: int = MAX_PAIRS,
           min_pairs: int = MIN_PAIRS, obvious: float | None = None) -> str:
    """ADOPT, NOISE, or MORE (run another pair). With `obvious`, a gain whose lowest pair is
    under 1 + obvious needs SMALL_GAIN_PAIRS pairs."""
    if not ratios:
        return MORE
    lo, hi = min(ratios), max(ratios)
    if hi < 1 + min_gain:
        return NOISE if len(ratios) >= min(min_pairs, MIN_PAIRS) else MORE
    if obvious is not None and lo < 1 + obvious:
        min_pairs = max(min_pairs, SMALL_GAIN_PAIRS)
    if len(ratios) < min_pairs:
        return MORE if len(ratios) < max(max_pairs, min_pairs) else NOISE
    if lo >= 1 + min_gain:
        return ADOPT
    return NOISE if len(ratios) >= max_pairs else MORE


def recheck_decide(ratios: list[float], min_gain: float, max_pairs: int = MAX_PAIRS,
                   obvious: float | None = None) -> str:
    """A rung measured no faster than the best, in pairs run again from scratch (its first
    trial is left out: that one read it slower): NOISE as soon as the first repeat agrees that
    it is no faster; else as decide() (every pair must show the gain; with `obvious`, a small
    one in SMALL_GAIN_PAIRS pairs)."""
    if ratios and ratios[0] < 1 + min_gain:
        return NOISE
    return decide(ratios, min_gain, max_pairs, MIN_PAIRS, obvious)


def busy_decision(decision: str, ratios: list[float], busy: bool, measured: float,
                  min_gain: float) -> str:
    """An ADOPT from pairs that ran on a busy machine stands only when every pair beats
    the noise the tune measured (repeats of one setting, `measured`, at least `min_gain`);
    else BUSY: the gain is not claimed (a busy machine moved repeats of one setting by more
    than the gain). Any other decision stands."""
    if decision != ADOPT or not busy or not ratios:
        return decision
    return ADOPT if min(ratios) >= 1 + max(min_gain, measured) else BUSY


def spread(repeats: list[list[float]]) -> float:
    """The measured noise: the largest slowest / fastest - 1 among repeated trials of one
    setting (each inner list: one setting's step times); 0 without repeats."""
    return max((max(r) / min(r) - 1 for r in repeats if len(r) > 1 and min(r) > 0),
               default=0.0)


def median_index(ratios: list[float]) -> int:
    """Index of the pair whose ratio is the median (the lower middle one for an even count)."""
    order = sorted(range(len(ratios)), key=lambda i: ratios[i])
    return order[(len(order) - 1) // 2]


def interval_text(ratios: list[float], claim: float | None = None) -> str:
    """'2.90x, 2.70-3.10x over 3 pairs' (the claim, default the median pair's, then the lowest
    and highest pair)."""
    if not ratios:
        return "not measured"
    claim = ratios[median_index(ratios)] if claim is None else claim
    if len(ratios) == 1:
        return f"{claim:.2f}x over 1 pair (not repeated)"
    return f"{claim:.2f}x, {min(ratios):.2f}-{max(ratios):.2f}x over {len(ratios)} pairs"
