"""What a tune found: its trials, the best settings, the speed-up, the line to change; kept in
tune.json (rewritten after every trial, so an interrupted tune keeps what it finished).

One verdict, one number (issue 31): `speedup`, `interval`, `ratios` and the claim's two sessions
are set only when the verdict confirmed a gain (`confirmed`); a leader the pairs did not confirm
(within noise, or the budget ran out) is reported under its own name (`leader_speedup`,
`leader_interval`, `leader_sessions`), never where a reader looks for the result."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from stallscope.core import units
from stallscope.core.capture.layout import TUNE_JSON
from stallscope.core.capture.overrides import change_line, format_value
from stallscope.core.errors import StallscopeError
from stallscope.core.session.steady import STATISTIC
from stallscope.core.tune import noise
from stallscope.core.tune.trial import Trial, settings_text
from stallscope.core.untrusted import read_json


@dataclass
class TuneResult:
    folder: Path
    script: str
    args: list[str]
    site: str = ""                  # "file:line" of the tuned DataLoader, as the user reads it
    selector: str = ""              # its `--set` selector: the absolute file and the line
    passed: dict = field(default_factory=dict)  # its arguments as the script passed them
    settings: dict = field(default_factory=dict)  # a framework's settings object that built it
    trials: list[Trial] = field(default_factory=list)
    baseline: int | None = None     # index of the trial of the script as written
    best: int | None = None         # index of the trial whose settings are kept
    leader: int | None = None       # the search's best trial, checked against the noise
    pairs: list = field(default_factory=list)  # (as-written trial, leader trial) per pair
    decision: str = ""              # noise.ADOPT / NOISE / UNCONFIRMED once pairs ran
    stopped: str = "running"        # "search done", "budget", "interrupted", "cancelled", ...
    notes: list[str] = field(default_factory=list)
    busy: str = ""                  # the machine's load during the trials, when it was high
    budget_s: float | None = None
    elapsed_s: float = 0.0
    nproc_per_node: int = 1

    def trial(self, index: int | None) -> Trial | None:
        return next((t for t in self.trials if t.index == index), None)

    @property
    def baseline_trial(self) -> Trial | None:
        return self.trial(self.baseline)

    @property
    def best_trial(self) -> Trial | None:
        return self.trial(self.best)

    @property
    def ratios(self) -> list[float]:
        """As-written step / leader step, per pair (the first pair is the search's trials)."""
        return self.pair_ratios(self.pairs)

    def measured_pairs(self, pairs: list) -> list[tuple[int, Trial, Trial]]:
        """(position in `pairs`, slow trial, fast trial) of the pairs whose two step times
        are known; a pair missing a trial or a figure is left out."""
        out = []
        for i, (b, lead) in enumerate(pairs):
            tb, tl = self.trial(b), self.trial(lead)
            if tb is not None and tl is not None and tb.step_ms and tl.step_ms:
                out.append((i, tb, tl))
        return out

    def pair_ratios(self, pairs: list) -> list[float]:
        """Slower side's step / faster side's step for (slow trial, fast trial) pairs."""
        return [_ratio(tb, tl) for _, tb, tl in self.measured_pairs(pairs)]

    @property
    def claim_pair(self) -> tuple[Trial, Trial] | None:
        """(as written, leader) of the pair whose ratio is the claim (claim_of)."""
        return self.claim_of(self.pairs)

    def claim_of(self, pairs: list) -> tuple[Trial, Trial] | None:
        """(slow, fast) of the pair whose ratio is the claim among `pairs`, whose first is the
        search's own trials: the median of the repeated pairs (back to back), or the search's
        pair alone (noise.py). The duels' notes state the same claim as the verdict."""
        measured = self.measured_pairs(pairs)
        repeats = [m for m in measured if m[0] > 0]  # pairs[0] is the search's own trials
        pick = repeats or measured
        if not pick:
            return None
        _, tb, tl = pick[noise.median_index([_ratio(tb, tl) for _, tb, tl in pick])]
        return tb, tl

    def interval_of(self, pairs: list, repeats_only: bool = False) -> str:
        """noise.interval_text of `pairs` with the claim of claim_of ('repeats_only': every
        pair is a repeat, as a recheck's are: the median of them all)."""
        pair = None if repeats_only else self.claim_of(pairs)
        return noise.interval_text(self.pair_ratios(pairs),
                                   None if pair is None else _ratio(*pair))

    @property
    def confirmed(self) -> bool:
        """The pairs confirmed the leader's gain and its settings are kept."""
        return (self.decision == noise.ADOPT and self.leader is not None
                and self.best == self.leader and self.best != self.baseline)

    @property
    def outcome(self) -> str:
        """The verdict's kind: 'faster' (a confirmed gain), 'within noise', 'busy machine' or
        'not confirmed' (a leader not kept), 'no gain' (nothing tried beat the script),
        'nothing to tune', 'no baseline' (the script as written was not measured), or
        'running'."""
        base = self.baseline_trial
        if base is None or not base.ok:
            return "running" if self.stopped == "running" else "no baseline"
        if not self.site:
            return "nothing to tune"
        if self.confirmed:
            return "faster"
        if self.leader_trial is None:
            return "no gain"
        if self.decision in (noise.NOISE, noise.BUSY):
            return self.decision
        return noise.UNCONFIRMED

    @property
    def leader_trial(self) -> Trial | None:
        """The leader: the search's best, once it is not the script as written (while the
        search runs, or when it stopped before the pairs, the best so far)."""
        if self.leader is not None:
            return self.trial(self.leader)
        return self.best_trial if self.best != self.baseline else None

    def _leader_pair(self) -> tuple[Trial, Trial] | None:
        pair = self.claim_pair
        if pair is None:  # no pairs yet: the search's two trials
            base, lead = self.baseline_trial, self.leader_trial
            if base is None or lead is None or not base.step_ms or not lead.step_ms:
                return None
            pair = base, lead
        return pair

    @property
    def leader_speedup(self) -> float | None:
        """The leader's measured speed-up, confirmed or not: the median pair's ratio."""
        pair = self._leader_pair()
        return _ratio(*pair) if pair is not None else None

    @property
    def leader_interval(self) -> str:
        """'2.90x, 2.70-3.10x over 3 pairs' of the leader ('' when not measured)."""
        ratios = self.ratios or ([self.leader_speedup] if self.leader_speedup else [])
        return noise.interval_text(ratios, self.leader_speedup) if ratios else ""

    @property
    def leader_sessions(self) -> tuple[str | None, str | None]:
        """The two sessions of the leader's median pair, confirmed or not."""
        pair = self._leader_pair()
        return (pair[0].session, pair[1].session) if pair is not None else (None, None)

    @property
    def speedup(self) -> float | None:
        """The confirmed speed-up (the median pair's ratio); None unless `confirmed`."""
        return self.leader_speedup if self.confirmed else None

    @property
    def interval(self) -> str:
        """The confirmed claim's '2.90x, 2.70-3.10x over 3 pairs'; '' unless `confirmed`."""
        return self.leader_interval if self.confirmed else ""

    @property
    def sessions(self) -> tuple[str | None, str | None]:
        """The two sessions whose steady figures give the confirmed claim (compare BEFORE
        AFTER); (None, None) unless `confirmed`."""
        return self.leader_sessions if self.confirmed else (None, None)

    @property
    def kept_trial(self) -> Trial | None:
        """The trial whose settings the verdict keeps: the confirmed leader, else the script
        as written."""
        return self.best_trial if self.confirmed else self.baseline_trial

    @property
    def quoted_trial(self) -> Trial | None:
        """The trial whose step time the verdict quotes for the settings it keeps, the one the
        table marks: the confirmed claim's (its median pair's leader side), else the script as
        written. The leader's first trial, which the claim's pairs repeated, is not it (the
        table starred trial 18 at 4.48 ms beside "best: ... at 3.69 ms", trial 23's)."""
        pair = self.claim_pair if self.confirmed else None
        return pair[1] if pair is not None else self.kept_trial

    @property
    def change(self) -> str:
        """The line to edit, e.g. "train.py:57: DataLoader(..., num_workers=0) -> num_workers=2,
        pin_memory=True"; empty when the script's settings stay (nothing confirmed)."""
        best = self.best_trial
        if not self.confirmed or best is None or not best.changes:
            return ""
        return change_line({"site": self.site, "passed": self.passed, "settings": self.settings},
                           best.changes)

    def to_json(self) -> dict:
        kept, leader = self.kept_trial, self.leader_trial
        return {
            "version": 1, "folder": str(self.folder), "script": self.script, "args": self.args,
            "dataloader": self.site, "selector": self.selector, "passed": self.passed,
            "settings": self.settings, "stopped": self.stopped,
            "budget_s": self.budget_s, "elapsed_s": round(self.elapsed_s, 2),
            "baseline": self.baseline, "best": kept.index if kept else None,
            "verdict": self.outcome, "confirmed": self.confirmed,
            "best_settings": kept.settings if kept else None,
            "speedup": self.speedup, "interval": self.interval,
            "ratios": self.ratios if self.confirmed else [],
            "baseline_session": self.sessions[0], "best_session": self.sessions[1],
            "change": self.change, "statistic": STATISTIC,
            "leader": leader.index if leader else None,
            "leader_settings": leader.settings if leader else None,
            "leader_speedup": self.leader_speedup, "leader_interval": self.leader_interval,
            "leader_ratios": self.ratios, "leader_sessions": list(self.leader_sessions),
            "pairs": [list(p) for p in self.pairs], "decision": self.decision,
            "nproc_per_node": self.nproc_per_node, "notes": self.notes,
            "busy": self.busy,
            "trials": [t.to_json() for t in self.trials],
        }

    @classmethod
    def from_json(cls, data: dict) -> TuneResult:
        return cls(folder=Path(data.get("folder", "")), script=str(data.get("script", "")),
                   args=list(data.get("args") or []), site=str(data.get("dataloader") or ""),
                   selector=str(data.get("selector") or ""),
                   passed=dict(data.get("passed") or {}),
                   settings=dict(data.get("settings") or {}),
                   trials=[Trial.from_json(t) for t in data.get("trials") or []],
                   baseline=data.get("baseline"), best=data.get("best"),
                   leader=data.get("leader"),
                   pairs=[tuple(p) for p in data.get("pairs") or [] if len(p) == 2],
                   decision=str(data.get("decision") or ""),
                   nproc_per_node=int(data.get("nproc_per_node") or 1),
                   stopped=str(data.get("stopped", "")), notes=list(data.get("notes") or []),
                   busy=str(data.get("busy") or ""),
                   budget_s=data.get("budget_s"), elapsed_s=float(data.get("elapsed_s") or 0))

    def save(self) -> Path:
        path = self.folder / TUNE_JSON
        tmp = self.folder / f".{TUNE_JSON}.part"
        tmp.write_text(json.dumps(self.to_json(), indent=2, default=str), encoding="utf-8")
        os.replace(tmp, path)
        return path


def _ratio(slow: Trial, fast: Trial) -> float:
    """slow's step / fast's step, of a measured pair (both known and non-zero)."""
    assert slow.step_ms and fast.step_ms  # TuneResult.measured_pairs keeps only those
    return slow.step_ms / fast.step_ms


def load_result(path: str | os.PathLike) -> TuneResult:
    p = Path(path)
    p = p / TUNE_JSON if p.is_dir() else p
    data = read_json(p, "tune.json")  # a regular file, capped, depth-limited: one line else
    try:
        return TuneResult.from_json(data)
    except (ValueError, TypeError, AttributeError, KeyError, OverflowError) as exc:
        raise StallscopeError(f"{p}: not a readable tune.json ({exc})") from None


def _ms(value: float | None) -> str:
    return "-" if value is None else units.ms(value * 1e3)


def table(result: TuneResult) -> str:
    """The trials, one row each, the one whose step time the verdict quotes marked."""
    gpu = any(t.utilization is not None for t in result.trials)
    rows: list[tuple[str, ...]] = [
        ("#", "settings", "step", "data wait", "GPU util", "peak RSS", "status")]
    quoted = result.quoted_trial
    for t in result.trials:
        mark = " *" if quoted is not None and t.index == quoted.index else ""
        rows.append((f"{t.index}{mark}", t.label, _ms(t.step_ms), _ms(t.data_wait_ms),
                     "-" if t.utilization is None else units.pct(t.utilization),
                     "-" if not t.peak_rss else units.size(t.peak_rss),
                     t.status + (f": {t.message}" if t.message else "")))
    keep = [0, 1, 2, 3, 4, 5, 6] if gpu else [0, 1, 2, 3, 5, 6]  # no GPU: no GPU column
    rows = [tuple(r[i] for i in keep) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(keep) - 1)]
    out = []
    for r in rows:
        cells = [r[0].rjust(widths[0]), r[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(r[2:-1], widths[2:], strict=True)]
        out.append("  ".join(cells) + "  " + r[-1])
    return "\n".join(out)


def verdict(result: TuneResult) -> list[str]:
    """The closing lines: best settings, measured speed-up, the line to change."""
    base, best = result.baseline_trial, result.best_trial
    lines = []
    if base is None or not base.ok:
        why = f" ({base.status}: {base.message})" if base is not None and base.message else ""
        return [f"the script as written did not finish a trial{why}: nothing to compare with",
                *(f"note: {note}" for note in result.notes)]
    if not result.site:  # the script built no DataLoader
        return [f"note: {note}" for note in result.notes] or ["nothing to tune"]
    leader = result.leader_trial
    if leader is not None and not result.confirmed:
        why = ("nothing measured faster beyond the noise" if result.outcome == noise.NOISE
               else "busy machine: other work took the CPU from the trials and the gain is "
               "within the noise it caused (see the notes)" if result.outcome == noise.BUSY
               else f"no gain was confirmed ({_unconfirmed_why(result.stopped)})")
        lines.append(f"keep your settings ({settings_text(base.settings)}): {why}")
        lines.append(f"leader, {result.outcome}, not kept: {leader.label} measured "
                     f"{result.leader_interval or 'nothing'} against the script as written")
    elif best is None or best.index == base.index:
        lines.append(f"best: the script's own settings ({settings_text(base.settings)}) at "
                     f"{_ms(base.step_ms)} per step; nothing tried was at least "
                     "5% faster")
    else:
        pair = result.claim_pair
        b, lead = pair if pair is not None else (base, best)
        lines.append(f"best: {best.label} at {_ms(lead.step_ms)} per step vs "
                     f"{_ms(b.step_ms)} as written: faster by {result.interval} "
                     f"(trials {b.index} and {lead.index})")
        lines.append(f"change: {result.change}")
    lines.append(f"step times: {STATISTIC}, on unprofiled steps"
                 + (f"; the slowest of {result.nproc_per_node} ranks"
                    if result.nproc_per_node > 1 else ""))
    if result.busy:
        lines.append(f"note: {result.busy}")
    short = [t for t in result.trials if t.ok and not t.steady_reached]
    if short:
        lines.append(f"note: trial{'s' if len(short) > 1 else ''} "
                     f"{', '.join(str(t.index) for t in short)} ended before steady state "
                     f"({short[0].message}); the script is too short for a sure figure")
    for note in result.notes:
        lines.append(f"note: {note}")
    return lines


def _unconfirmed_why(stopped: str) -> str:
    """Why a leader was not confirmed, in the verdict: the budget or the trial limit, the tune
    stopped by hand, or a repeat that failed (the search ended on its own: "the tune was
    search done" said nothing)."""
    if stopped in ("budget", "trial limit"):
        return "the notes say what ran out"
    if stopped in ("interrupted", "cancelled", "running"):
        return f"the tune was {stopped}"
    return "the notes say why"


def format_settings(settings: dict) -> str:
    return ", ".join(f"{k}={format_value(v)}" for k, v in settings.items())
