"""`check --max-data-wait` counts epoch starts (issue 34): a run that loses its time to the
pause before each epoch's first batch fails a limit its steady steps alone would pass, and the
line says what the share covers, the figure analyze and the run header state."""

from __future__ import annotations

import json

import pytest
from runner_helpers import run, write_script
from test_run_record import EPOCHS

from stallscope.core import cli
from stallscope.core.units import pct

pytestmark = pytest.mark.runner


def test_max_data_wait_counts_epoch_starts(tmp_path, capsys):
    script = write_script(tmp_path, EPOCHS)
    proc, session = run(tmp_path, script, "--no-stop-after-window")
    assert proc.returncode == 0, proc.stderr
    assert cli.main(["analyze", str(session), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)["run"]
    share, steps_only = figures["data_wait_share"], figures["steps_only_wait_share"]
    # 4 epochs each wait ~0.3 s for 2 workers to start, against ~10 ms steps
    assert share > steps_only + 0.2
    limit = f"{100 * (share + steps_only) / 2:.1f}%"
    assert cli.main(["check", str(session), "--max-data-wait", limit]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [f"FAIL data wait {pct(share)} incl. epoch starts > {limit} "
                   "(--max-data-wait)"]
    assert cli.main(["analyze", str(session)]) == 0
    text = capsys.readouterr().out
    assert f"data wait {pct(share)} incl. epoch starts ({pct(steps_only)} in steady steps " \
           "only)" in text


def test_max_data_wait_help_says_what_it_covers(capsys):
    with pytest.raises(SystemExit):
        cli.main(["check", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "waiting on the DataLoader, epoch starts included" in help_text
