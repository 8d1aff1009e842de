"""`--set`: DataLoader settings changed without editing the script, and the record of every
DataLoader the script builds (call site, arguments as passed and as overridden). Real runner
subprocesses on tiny scripts; bad values are refused before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from runner_helpers import RUNNER, events, finished, run, session_of, write_script
from scripts import line_of

from stallscope.core.capture.overrides import OverrideError, apply, choose, parse_sets

pytestmark = pytest.mark.runner  # scripts under the runner (subprocess), DataLoader workers

# Two loaders: the second is built in a helper function, so its call site is that line.
TWO_LOADERS = """
import torch
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)

def make_val():
    return DataLoader(data, batch_size=8, persistent_workers=False)

train = DataLoader(data, batch_size=8, shuffle=True, num_workers=0)
val = make_val()
# one flushed write a line: the runner's notes share stdout.log and must not land mid-line
for name, dl in (("train", train), ("val", val)):
    fields = (dl.num_workers, dl.pin_memory, dl.persistent_workers, dl.prefetch_factor)
    print(" ".join(map(str, (name, *fields))), flush=True)
for x, y in train:
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    for x, y in val:
        model(x)
"""
TRAIN_LINE = line_of(TWO_LOADERS, "train = DataLoader(")
VAL_LINE = line_of(TWO_LOADERS, "    return DataLoader(")  # make_val's line: the val loader's site


def printed(session) -> dict[str, list[str]]:
    out = {}
    for line in (session / "stdout.log").read_text().splitlines():
        name, *rest = line.split()
        if name in ("train", "val"):
            out[name] = rest
    return out


def test_parse_sets_forms_and_precedence():
    sets = parse_sets(["num_workers=4", "2:num_workers=1", "train.py:57:pin_memory=yes",
                       "prefetch_factor=3", "persistent_workers=off"])
    assert [(o.key, o.value, o.scope) for o in sets] == [
        ("num_workers", 4, ""), ("num_workers", 1, "2"), ("pin_memory", True, "train.py:57"),
        ("prefetch_factor", 3, ""), ("persistent_workers", False, "")]
    # the second loader built at /home/me/train.py:57 gets both narrower choices
    chosen = choose(sets, 2, "/home/me/train.py", 57)
    assert {k: o.value for k, o in chosen.items()} == {
        "num_workers": 1, "pin_memory": True, "prefetch_factor": 3, "persistent_workers": False}
    assert choose(sets, 1, "/home/me/other.py", 57)["num_workers"].value == 4
    assert "pin_memory" not in choose(sets, 1, "/home/me/xtrain.py", 57)  # whole names only


@pytest.mark.parametrize("bad, words", [
    (["batch_size=4"], "unknown key 'batch_size' (known: num_workers"),
    (["num_workers=-1"], "num_workers must be >= 0"),
    (["num_workers=four"], "num_workers takes a whole number, not 'four'"),
    (["pin_memory=maybe"], "pin_memory takes true or false, not 'maybe'"),
    (["prefetch_factor=0"], "prefetch_factor must be >= 1"),
    (["num_workers"], "expected KEY=VALUE"),
    (["0:num_workers=2"], "DataLoaders count from 1"),
    (["train.py:x:num_workers=2"], "expected KEY=VALUE"),
    (["num_workers=0", "prefetch_factor=4"],
     "--set prefetch_factor=4: prefetch_factor needs worker processes, but --set num_workers=0"),
    (["2:num_workers=0", "persistent_workers=true"], "persistent_workers needs worker processes"),
])
def test_bad_sets_name_what_is_wrong(bad, words):
    with pytest.raises(OverrideError) as info:
        parse_sets(bad)
    assert words in str(info.value)
    assert "\n" not in str(info.value)


def test_apply_keeps_the_combination_valid():
    # the script asked for persistent workers; --set num_workers=0 drops them with a note
    values, notes = apply({"num_workers": 4, "persistent_workers": True},
                          {o.key: o for o in parse_sets(["num_workers=0"])})
    assert values["num_workers"] == 0 and values["persistent_workers"] is False
    assert notes == ["persistent_workers=True dropped: num_workers=0 takes none"]
    # a prefetch_factor override on a loader that keeps no workers is ignored, said so
    values, notes = apply({}, {o.key: o for o in parse_sets(["prefetch_factor=4"])})
    assert values["prefetch_factor"] is None
    assert notes == ["--set prefetch_factor=4 ignored: this DataLoader has no worker processes "
                     "(num_workers=0)"]


def test_set_applies_to_every_loader_or_a_chosen_one(tmp_path):
    script = write_script(tmp_path, TWO_LOADERS, "train.py")
    proc, session = run(tmp_path, script, "--no-stop-after-window",
                        "--set", "num_workers=2", "--set", "2:num_workers=1",
                        "--set", f"train.py:{TRAIN_LINE}:persistent_workers=true",
                        "--set", "prefetch_factor=3")
    assert proc.returncode == 0, proc.stderr
    # what the script's own objects say
    assert printed(session) == {"train": ["2", "False", "True", "3"],
                                "val": ["1", "False", "False", "3"]}
    built = events(session, "dataloader")
    assert [(b["index"], b["site"], b["line"]) for b in built] == [
        (1, f"train.py:{TRAIN_LINE}", TRAIN_LINE), (2, f"train.py:{VAL_LINE}", VAL_LINE)]
    assert built[0]["function"] == "<module>" and built[1]["function"] == "make_val"
    assert built[0]["passed"] == {"batch_size": 8, "shuffle": True, "num_workers": 0}
    assert built[0]["overridden"] == {"num_workers": {"from": 0, "to": 2},
                                      "persistent_workers": {"from": False, "to": True},
                                      "prefetch_factor": {"from": None, "to": 3}}
    assert built[1]["passed"] == {"batch_size": 8, "persistent_workers": False}
    assert built[1]["effective"] == {"num_workers": 1, "pin_memory": False,
                                     "persistent_workers": False, "prefetch_factor": 3}
    assert f"train.py:{TRAIN_LINE}: DataLoader num_workers 0 -> 2" in proc.stderr
    # run.json: the overrides as given, and the loaders built with their batch counts
    run_json = session_of(session).run
    assert run_json["overrides"] == ["num_workers=2", "2:num_workers=1",
                                     f"train.py:{TRAIN_LINE}:persistent_workers=true",
                                     "prefetch_factor=3"]
    loaders = {d["site"]: d for d in run_json["dataloaders"]}
    assert loaders[f"train.py:{TRAIN_LINE}"]["batches"] == 4
    assert loaders[f"train.py:{VAL_LINE}"]["batches"] == 4
    assert loaders[f"train.py:{TRAIN_LINE}"]["created"] == 1
    assert finished(session)["dataloaders"] == run_json["dataloaders"]


def test_without_set_the_loaders_are_recorded_unchanged(tmp_path):
    script = write_script(tmp_path, TWO_LOADERS, "train.py")
    proc, session = run(tmp_path, script, "--no-stop-after-window")
    assert proc.returncode == 0, proc.stderr
    assert printed(session) == {"train": ["0", "False", "False", "None"],
                                "val": ["0", "False", "False", "None"]}
    assert [b["overridden"] for b in events(session, "dataloader")] == [{}, {}]
    assert session_of(session).run["overrides"] == []


def test_a_choice_that_matches_nothing_is_said(tmp_path):
    script = write_script(tmp_path, TWO_LOADERS, "train.py")
    proc, session = run(tmp_path, script, "--no-stop-after-window",
                        "--set", "3:num_workers=1", "--set", "train.py:99:pin_memory=true")
    assert proc.returncode == 0, proc.stderr
    warnings = [w["message"] for w in events(session, "warning")]
    built = f"the script built 2: train.py:{TRAIN_LINE}, train.py:{VAL_LINE}"
    assert warnings == [f"--set 3:num_workers=1 matched no DataLoader ({built})",
                        f"--set train.py:99:pin_memory=true matched no DataLoader ({built})"]
    assert warnings[0] in proc.stderr
    assert printed(session)["train"] == ["0", "False", "False", "None"]


@pytest.mark.parametrize("sets, words", [
    (["num_workers=-2"], "num_workers must be >= 0"),
    (["prefetch_factor=4", "num_workers=0"], "prefetch_factor needs worker processes"),
    (["workers=2"], "unknown key 'workers'"),
    (["pin_memory=2x"], "pin_memory takes true or false"),
])
def test_bad_set_refused_before_the_script_starts(tmp_path, sets, words):
    """Runner and CLI: exit 2, one line, the script never runs, no session folder is left."""
    script = write_script(tmp_path, "open('ran', 'w').write('yes')\n", "train.py")
    flags = [a for s in sets for a in ("--set", s)]
    proc = subprocess.run([sys.executable, str(RUNNER), *flags, "--", str(script)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and words in proc.stderr, proc.stderr
    cli = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "run", *flags, "--",
                          str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert cli.returncode == 2
    assert cli.stderr.startswith("stallscope: error: --set ") and words in cli.stderr
    assert cli.stderr.count("\n") == 1, cli.stderr
    assert not (tmp_path / "ran").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_cli_missing_script_creates_no_session_folder(tmp_path):
    # Sessions default to the user's data folder: point it here, so a stray one would show.
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    proc = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "run", "--",
                           "nothere.py"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60, env=env)
    assert proc.returncode == 2
    assert proc.stderr == f"stallscope: error: script not found: {tmp_path / 'nothere.py'}\n"
    assert list(tmp_path.iterdir()) == []
    # the runner alone, without --session, likewise
    proc = subprocess.run([sys.executable, str(RUNNER), "--", "nothere.py"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60, env=env)
    assert proc.returncode == 2 and "script not found" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_script_that_raises_is_named_once_and_explains_the_missing_trace(tmp_path):
    from stallscope.core.session.reader import no_trace_reason

    script = write_script(tmp_path, "import torch\nraise RuntimeError('no data here')\n",
                          "train.py")
    session = tmp_path / "s"
    proc = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "run", "--session",
                           str(session), "--", str(script)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 1
    assert "no steps were seen" not in proc.stderr
    assert proc.stderr.count("RuntimeError: no data here") == 2  # traceback + summary line
    assert (f"stallscope: session {session}: the script raised RuntimeError: no data here "
            "(rc 1), 0 steps") in proc.stderr
    reason = no_trace_reason(session)
    assert reason == (f"{session}: train.py raised RuntimeError: no data here at step 0 before "
                      f"a trace was written; its output is in {session / 'stdout.log'}")
    fin = json.loads((session / "events.jsonl").read_text().splitlines()[-1])
    assert "warning" not in fin
