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


def test_a_comparison_of_other_machines_says_so_first_and_names_a_cause_that_moved_its_way():
    """hta_trace_diff: rank 3 on an A100 against rank 1 on a V100. The steps are slower; the
    idle that moved most (backward, 8.8 ms less) improved, so it cannot be the reason: the
    verdict names queued work, which grew."""
    from stallscope.core.compare import compare_reports, unlike, verdict
    from stallscope.core.document import analyze_path

    before = analyze_path(fixture_path("hta_trace_diff_control"))
    after = analyze_path(fixture_path("hta_trace_diff_test"))
    metrics = compare_reports(before, after)
    found = verdict(metrics, unlike(before, after))
    assert found.text.startswith("not like for like (different GPUs: NVIDIA A100-PG509-200 "
                                 "(device 3) vs Tesla V100-SXM2-16GB (device 1); different "
                                 "ranks: rank 3 vs rank 1): after is slower")
    biggest = max((m for m in metrics if m.cause and not m.noise), key=lambda m: abs(m.delta))
    assert biggest.cause == "backward" and biggest.delta < 0  # improved: not the reason
    assert found.word == "slower" and found.cause is not None
    assert found.cause.cause == "gpu_wait" and found.cause.delta > 0
    assert found.text.endswith("; idle on queued work 1.35 ms → 4.38 ms per step")
    # like for like: no lead
    same = verdict(compare_reports(before, before), unlike(before, before))
    assert same.text.startswith("after is about as fast") and not same.unlike


@pytest.mark.parametrize("b, a", [("kineto_nw0", "tracelens_resnet"),
                                  ("hta_trace_diff_test", "kineto_nw0"),
                                  ("hta_rank-0", "hta_trace_diff_test")])
def test_the_named_cause_always_moved_the_way_the_steps_did(b, a):
    from stallscope.core.compare import compare_reports, verdict
    from stallscope.core.document import analyze_path

    metrics = compare_reports(analyze_path(fixture_path(b)), analyze_path(fixture_path(a)))
    found = verdict(metrics)
    assert found.step is not None and found.cause is not None
    grew = found.cause.delta > 0
    assert grew == (found.word == "slower")  # more idle when slower, less when faster
