"""document.analyze_path hands the session's DataLoaders (run.json) to the advice: the
DataLoader card names the user's line to change and a `--set FILE:LINE:num_workers=N` that the
runner applies to that very loader."""

from __future__ import annotations

import re
import shutil

import pytest
from runner_helpers import TRAIN, run, session_of, write_script

from stallscope.core.analysis import analyze
from stallscope.core.document import analyze_path, session_loaders
from stallscope.core.trace import load

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess)

SET = re.compile(r"--set (\S+:\d+:num_workers=(\d+)) ")


def _card(report):
    return next(a for a in report.advice if a.id == "dataloader_bound")


def test_the_dataloader_card_names_the_users_line(tmp_path):
    script = write_script(tmp_path, TRAIN, "train.py")
    line = 1 + TRAIN.splitlines().index(next(x for x in TRAIN.splitlines()
                                             if "DataLoader(Slow()" in x))
    proc, session = run(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    (loader,) = session_loaders(session_of(session).traces()[0])
    assert loader["site"] == f"train.py:{line}"

    fix = _card(analyze_path(session)).fix
    selector, n = SET.search(fix).groups()
    assert selector == f"train.py:{line}:num_workers={n}" and int(n) >= 1
    assert f"The line to change: train.py:{line}: DataLoader(...) -> num_workers={n}." in fix
    # analysis stays pure: without the session's facts (its loaders, its machine's cores) the
    # card gives the general --set, not capped at cores it cannot know (issue 33)
    bare = _card(analyze(load(session))).fix
    general = re.search(r"--set num_workers=(\d+) ", bare)
    assert general is not None and int(general[1]) >= int(n), bare
    assert "The line to change" not in bare

    # the runner takes that --set and applies it to the loader on that line
    again = tmp_path / "again"
    again.mkdir()
    shutil.copy(script, again / "train.py")
    proc, session = run(again, again / "train.py", "--set", selector)
    assert proc.returncode == 0, proc.stderr
    (loader,) = session_of(session).loaders()
    assert loader["overridden"] == {"num_workers": {"from": 0, "to": int(n)}}
    assert loader["effective"]["num_workers"] == int(n)


def test_outside_a_session_there_are_no_loaders(real_trace):
    assert session_loaders(real_trace("kineto_nw0")) == []
