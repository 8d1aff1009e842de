"""`stallscope-cli compare` prints the verdict its --help promises: faster, slower or about as
fast, from the step time's own verdict, on real traces (both orders and a trace against
itself)."""

from __future__ import annotations

import json

import pytest
from fixture_traces import fixture_path

from stallscope.core.cli import main


def run(capsys, *args) -> str:
    assert main(["compare", *map(str, args)]) == 0
    return capsys.readouterr().out


def test_help_promises_the_verdict_the_output_prints(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "one verdict line: faster, slower or about as fast" in help_text
    nw0, nw4 = fixture_path("kineto_nw0"), fixture_path("kineto_nw4_worker0.1623212756351")
    lines = run(capsys, nw0, nw4).splitlines()
    line = next(x for x in lines if x.startswith("verdict: "))
    assert line.startswith("verdict: after is faster: 1.25x, 174.83 ms → 139.69 ms per step, "
                           "-35.14 ms (-20%)")
    assert line.endswith("; idle on data loading 58.73 ms → 1.18 ms per step")
    back = next(x for x in run(capsys, nw4, nw0).splitlines() if x.startswith("verdict: "))
    assert back.startswith("verdict: after is slower: 0.80x, 139.69 ms → 174.83 ms per step")
    same = next(x for x in run(capsys, nw0, nw0).splitlines() if x.startswith("verdict: "))
    assert same == "verdict: after is about as fast: 174.83 ms → 174.83 ms per step, within noise"


def test_json_carries_the_same_verdict(capsys):
    nw0, nw4 = fixture_path("kineto_nw0"), fixture_path("kineto_nw4_worker0.1623212756351")
    assert main(["compare", str(nw0), str(nw4), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "faster"
    text = next(x for x in run(capsys, nw0, nw4).splitlines() if x.startswith("verdict: "))
    assert text == f"verdict: {out['verdict_text']}"
