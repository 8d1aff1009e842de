"""tune.json for each kind of verdict (issue 31): the speed-up a reader finds is the confirmed
one; a leader the pairs did not confirm is named as the leader, never as the result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tune_json import assert_one_number

from stallscope.core.cli import main
from stallscope.core.tune import Trial, TuneResult, noise, table, verdict

SCRIPT = {"num_workers": 0, "pin_memory": False, "persistent_workers": False,
          "prefetch_factor": None}
TWO = {**SCRIPT, "num_workers": 2}


def trial(index: int, settings: dict, step_ms: float | None, status: str = "ok") -> Trial:
    changes = {k: v for k, v in settings.items() if SCRIPT.get(k) != v}
    return Trial(index, f"{index:02d}", dict(settings), changes, session=f"/s/{index}",
                 status=status, step_ms=step_ms, steady_reached=True)


def tuned(tmp_path: Path, ratios: list[float], decision: str, stopped: str = "search done",
          notes: list[str] | None = None) -> TuneResult:
    """Trial 1 as written, trial 2 the leader (2 workers at 50 ms), then one repeated pair
    per further ratio; the job's rule for `best` (the leader only when adopted)."""
    trials = [trial(1, SCRIPT, 50.0 * ratios[0]), trial(2, TWO, 50.0)]
    pairs = [(1, 2)]
    for r in ratios[1:]:
        n = len(trials)
        trials += [trial(n + 1, SCRIPT, 50.0 * r), trial(n + 2, TWO, 50.0)]
        pairs.append((n + 1, n + 2))
    result = TuneResult(tmp_path, "/w/train.py", [], site="train.py:9",
                        passed={"num_workers": 0}, trials=trials, baseline=1, leader=2,
                        pairs=pairs, decision=decision, stopped=stopped, notes=notes or [])
    result.best = 2 if decision == noise.ADOPT else 1
    return result


def read(result: TuneResult) -> dict:
    return json.loads(result.save().read_text(encoding="utf-8"))


def test_a_confirmed_gain_is_the_speedup(tmp_path):
    data = read(tuned(tmp_path, [3.0, 2.6, 2.8], noise.ADOPT))
    assert_one_number(data)
    assert (data["verdict"], data["confirmed"]) == ("faster", True)
    assert data["speedup"] == pytest.approx(2.6)  # the median of the two repeats
    assert data["interval"] == "2.60x, 2.60-3.00x over 3 pairs"
    assert data["change"] == "train.py:9: DataLoader(..., num_workers=0) -> num_workers=2"
    assert (data["baseline_session"], data["best_session"]) == ("/s/3", "/s/4")


def test_the_table_marks_the_trial_whose_figure_the_verdict_quotes(tmp_path):
    # hunt item 3 (s3_iterable.py): the leader's first trial, 18, read 4.48 ms; the claim is
    # the repeated pair (24, 23). The table starred 18 beside "best: ... at 3.69 ms" (23's).
    sixteen = {**SCRIPT, "num_workers": 16}
    trials = [trial(1, SCRIPT, 49.81), trial(18, sixteen, 4.48), trial(23, sixteen, 3.69),
              trial(24, SCRIPT, 49.72)]
    result = TuneResult(tmp_path, "/w/train.py", [], site="train.py:9",
                        passed={"num_workers": 0}, trials=trials, baseline=1, leader=18,
                        best=18, pairs=[(1, 18), (24, 23)], decision=noise.ADOPT,
                        stopped="search done")
    assert_one_number(read(result))
    assert verdict(result)[0].startswith("best: num_workers=16 at 3.69 ms per step vs 49.72 ms "
                                         "as written: faster by 13.47x")
    assert verdict(result)[0].endswith("(trials 24 and 23)")
    starred = [row.split()[:3] for row in table(result).splitlines()[1:] if " * " in row]
    assert starred == [["23", "*", "num_workers=16"]]
    # nothing confirmed: the script as written, whose figure the verdict quotes
    result.decision, result.best = noise.NOISE, 1
    starred = [row.split()[0] for row in table(result).splitlines()[1:] if " * " in row]
    assert starred == ["1"]


@pytest.mark.parametrize("ratios, decision, stopped, kind, why", [
    ([1.757, 0.69, 1.1], noise.NOISE, "search done", "within noise",
     "nothing measured faster beyond the noise"),
    ([2.16], noise.UNCONFIRMED, "budget", "not confirmed",
     "no gain was confirmed (the notes say what ran out)"),
])
def test_a_leader_not_confirmed_is_no_speedup(tmp_path, ratios, decision, stopped, kind, why):
    # issue 31: HF Trainer's tune.json read speedup 1.757 beside "keep your settings"
    result = tuned(tmp_path, ratios, decision, stopped)
    data = read(result)
    assert_one_number(data)
    assert (data["verdict"], data["confirmed"]) == (kind, False)
    assert data["leader"] == 2 and data["leader_settings"] == TWO
    assert data["leader_speedup"] == pytest.approx(ratios[0] if len(ratios) == 1
                                                   else sorted(ratios[1:])[0])
    assert data["best_settings"] == SCRIPT and data["best"] == 1
    lines = verdict(result)
    assert lines[0] == ("keep your settings (num_workers=0, pin_memory=false, "
                        f"persistent_workers=false): {why}")
    assert lines[1].startswith(f"leader, {kind}, not kept: num_workers=2 measured ")
    assert not any(line.startswith(("best:", "change:")) for line in lines)


def test_a_leader_whose_repeat_failed_says_the_notes_tell_why(tmp_path):
    # a repeat that crashed leaves the decision unconfirmed and the search ends on its own:
    # the verdict said "(the tune was search done)"
    result = tuned(tmp_path, [2.16], noise.UNCONFIRMED, notes=[
        "a repeat of num_workers=2 against as written failed (crashed, ok): its gain is not "
        "confirmed"])
    assert_one_number(read(result))
    assert verdict(result)[0].endswith(": no gain was confirmed (the notes say why)")


def test_a_tune_stopped_mid_search_holds_its_leader_as_a_leader(tmp_path):
    result = tuned(tmp_path, [2.0], "", stopped="interrupted")
    result.leader, result.pairs, result.best = None, [], 2  # the search's best so far
    data = read(result)
    assert_one_number(data)
    assert data["verdict"] == "not confirmed" and data["leader"] == 2
    assert data["leader_interval"] == "2.00x over 1 pair (not repeated)"
    assert verdict(result)[0].endswith("no gain was confirmed (the tune was interrupted)")


def test_no_gain_and_a_crashed_baseline_hold_no_speedup(tmp_path):
    result = tuned(tmp_path, [1.0], "")
    result.leader, result.pairs, result.best = None, [], 1
    data = read(result)
    assert_one_number(data)
    assert data["verdict"] == "no gain" and data["leader"] is None
    assert data["leader_speedup"] is None

    crashed = TuneResult(tmp_path, "/w/train.py", [], baseline=1, best=None,
                         stopped="the script as written could not be measured",
                         trials=[trial(1, SCRIPT, None, status="crashed")])
    data = read(crashed)
    assert_one_number(data)
    assert data["verdict"] == "no baseline" and data["best_settings"] == SCRIPT  # kept


def test_compare_of_a_tune_folder_without_a_confirmed_gain_says_so(tmp_path, capsys):
    tuned(tmp_path, [1.757, 0.69, 1.1], noise.NOISE).save()
    assert main(["compare", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"stallscope: error: {tmp_path}: the tune confirmed no gain (within "
                          "noise): the script's settings stay, nothing to compare; its "
                          "unconfirmed leader: stallscope-cli compare /s/3 /s/4")  # the median pair
    assert len(err.strip().splitlines()) == 1


def test_compare_of_a_tune_folder_with_no_gain_says_it_once(tmp_path, capsys):
    result = tuned(tmp_path, [1.0], "")
    result.leader, result.pairs, result.best = None, [], 1
    result.save()
    assert main(["compare", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"stallscope: error: {tmp_path}: the tune confirmed no gain: the "
                          "script's settings stay, nothing to compare"), err  # not "(no gain)"


def test_notes_that_contradict_each_other_are_caught(tmp_path):
    # the check itself can fail: the pair of notes for one setting
    result = tuned(tmp_path, [1.2, 1.1], noise.UNCONFIRMED, "budget", notes=[
        "the time budget (180 s) ran out before num_workers=1 was repeated against as "
        "written: its gain is not confirmed",
        "num_workers=1 against as written: 1.10x, 1.10-1.20x over 2 pairs: not kept"])
    with pytest.raises(AssertionError):
        assert_one_number(read(result))
