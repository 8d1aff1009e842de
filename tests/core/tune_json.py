"""What every tune.json must hold (issue 31), checked on the unit results and on real tunes."""

from __future__ import annotations

import re


def assert_one_number(data: dict) -> None:
    """One verdict, one number: `speedup`, `interval`, `ratios`, `change` and the claim's
    sessions are set only for a confirmed gain; an unconfirmed leader is only under its own
    `leader_*` names; the notes never say a repeat was missing beside its repeated pairs."""
    trials = {t["index"]: t for t in data["trials"]}
    assert data["confirmed"] == (data["verdict"] == "faster"), data["verdict"]
    if data["confirmed"]:
        assert data["decision"] == "adopt" and data["best"] == data["leader"] != data["baseline"]
        assert data["speedup"] == data["leader_speedup"] and data["speedup"] > 1
        assert data["interval"] == data["leader_interval"] != ""
        assert data["ratios"] == data["leader_ratios"] and data["change"]
        assert data["best_settings"] == trials[data["best"]]["settings"]
        assert data["best_session"] and data["baseline_session"]
    else:
        assert data["speedup"] is None and data["interval"] == "" and data["ratios"] == []
        assert data["change"] == "" and data["best"] == data["baseline"]
        assert data["best_session"] is None and data["baseline_session"] is None
        if data["baseline"] is not None:
            assert data["best_settings"] == trials[data["baseline"]]["settings"]
    missing = [m.group(1) for note in data["notes"]
               for m in [re.search(r"before (.+?) was repeated", note)] if m]
    for label in missing:
        assert not any(re.search(rf"{re.escape(label)} .*over [2-9] pairs", note)
                       for note in data["notes"]), (label, data["notes"])
