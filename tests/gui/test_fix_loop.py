"""The advice cards' fix loop in the main window: the DataLoader card's "Try it" opens the tune
dialog on the script of the session being viewed (a bare trace asks for the script), its
"Compare before/after" opens the compare view on baseline vs best, and the card's LMDB mention
opens the wizard with the script's Dataset as the factory source. No real tune is run here
(tests/gui/test_tune_dialog.py runs real trials)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import json
import sys
from pathlib import Path

import pytest
from fixture_traces import fixture_path
from PySide6.QtWidgets import QFileDialog
from shots import save_shot

from stallscope.core.compare import step_ms
from stallscope.core.tune.script import dataset_factory, script_of, session_folder
from stallscope.gui.dialogs import confirm
from stallscope.gui.dialogs.tune import TuneDialog

DATA_PY = '''from torch.utils.data import Dataset


class Flowers(Dataset):
    def __init__(self, root, size=224):
        self.root = root

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return i


def helper(x):
    return x


def make_flowers():
    return Flowers("/data/flowers")
'''

TRAIN_PY = '''import torch
from torch.utils.data import DataLoader
from data import Flowers

loader = DataLoader(Flowers("/data/flowers"), batch_size=8)
for batch in loader:
    pass
'''


def make_session(folder: Path, trace: Path, script: Path | None = None, **run) -> Path:
    """A session folder as the runner leaves it: run.json, events.jsonl, traces/<trace>."""
    (folder / "traces").mkdir(parents=True)
    (folder / "traces" / "train.1.pt.trace.json.gz").symlink_to(trace)
    info = {"version": 1, "script": str(script or folder / "train.py"), "python": sys.executable,
            "cwd": str(folder), **run}
    (folder / "run.json").write_text(json.dumps(info))
    (folder / "events.jsonl").write_text(json.dumps({"event": "started", "t": 0.0}) + "\n")
    return folder


@pytest.fixture
def project(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "data.py").write_text(DATA_PY)
    (code / "train.py").write_text(TRAIN_PY)
    return code


@pytest.fixture
def session(tmp_path, project):
    return make_session(tmp_path / "session", fixture_path("kineto_nw0"), project / "train.py",
                        args=["--epochs", "1"], cwd=str(project),
                        dataloaders=[{"site": "train.py:5", "file": str(project / "train.py"),
                                      "line": 5, "dataset": "Flowers"}])


@pytest.fixture
def confirmed(monkeypatch):
    """The user says yes to every confirmation; the dialogs' text is kept, as shown."""
    seen: list[str] = []

    def yes(dialog):
        seen.append(dialog.shown_text())
        return True

    monkeypatch.setattr(confirm, "answer", yes)
    return seen


def shot(widget, name: str) -> None:
    save_shot(widget, f"wire_{name}")


def dataloader_card(window):
    summary = window.analysis.summary
    index = next(i for i, a in enumerate(summary.report.advice) if a.id == "dataloader_bound")
    return summary.advice_cards[index]


# ------------------------------------------------------------------ the script and its Dataset

def test_script_of_a_session_and_of_its_trace(session, project):
    trace = session / "traces" / "train.1.pt.trace.json.gz"
    assert session_folder(session) == session == session_folder(trace)
    for path in (session, trace):
        info = script_of(path)
        assert info.script == str(project / "train.py") and info.args == ["--epochs", "1"]
        assert info.cwd == str(project) and info.datasets == ["Flowers"]
    assert script_of(fixture_path("kineto_nw0")) is None  # a bare trace has no session


def test_dataset_factory_finds_the_scripts_dataset(tmp_path, project):
    data, train = project / "data.py", project / "train.py"
    # the DataLoader's Dataset needs arguments: the no-argument function returning it
    assert dataset_factory(str(train), ["Flowers"], [str(data)]) == f"{data}:make_flowers"
    # no run.json: the Dataset subclass of a module the script imports from its folder
    assert dataset_factory(str(train)) == f"{data}:make_flowers"
    simple = tmp_path / "simple.py"
    simple.write_text("import torch.utils.data as tud\n\nclass Pairs(tud.Dataset):\n"
                      "    def __init__(self, n=8):\n        self.n = n\n")
    # no run.json: a class of the script whose base is a ...Dataset; buildable as it is
    assert dataset_factory(str(simple)) == f"{simple}:Pairs"
    # a Dataset that needs arguments and no factory for it: the class (the wizard says why)
    demo = Path(__file__).resolve().parents[2] / "resources" / "demo" / "train_demo.py"
    assert dataset_factory(str(demo)) == f"{demo}:JpegFolder"
    plain = tmp_path / "plain.py"
    plain.write_text("def make_model():\n    return 1\n")
    assert dataset_factory(str(plain)) == ""
    assert dataset_factory(str(tmp_path / "missing.py")) == ""


# ------------------------------------------------------------------ Try it

def test_try_it_opens_the_tune_dialog_on_the_sessions_script(qtbot, window, session, project,
                                                              monkeypatch, confirmed):
    monkeypatch.setattr(TuneDialog, "start", lambda self: pytest.fail("no tune in this test"))
    with qtbot.waitSignal(window.sig_document_shown, timeout=60_000):
        window.open_path(str(session))
    card = dataloader_card(window)
    assert set(card.buttons) == {"try_it", "lmdb"} and card.buttons["try_it"].isVisible()
    shot(window, "dataloader_card_1400x900")
    with qtbot.waitSignal(window.fix_loop.sig_tune_opened, timeout=5_000) as opened:
        card.buttons["try_it"].click()
    dialog = opened.args[0]
    qtbot.addWidget(dialog)
    assert isinstance(dialog, TuneDialog) and dialog.isVisible()
    assert dialog.script == str((project / "train.py").resolve())
    assert dialog.args == ["--epochs", "1"] and dialog.cwd == str(project)
    assert dialog.python == sys.executable and dialog.state == "idle"
    assert dialog.windowTitle() == "Tune the DataLoader: train.py"
    assert len(confirmed) == 1 and "--epochs 1" in confirmed[0]  # what will run, shown first
    shot(dialog, "tune_dialog_prefilled")
    # a second click shows the same dialog
    card.buttons["try_it"].click()
    assert window.fix_loop.tune_dialog is dialog
    dialog.close()


def test_try_it_on_a_session_recorded_on_a_host_tunes_there(qtbot, window, tmp_path,
                                                             monkeypatch):
    """A mirror of a run on a host (run.json `remote`, cwd the host's folder): "Try it" asks
    first, naming the host and showing the command as ssh runs it, then opens the tune dialog
    with Where on that host, its interpreter (remote.python) and folder, the host's script."""
    monkeypatch.setattr(TuneDialog, "start", lambda self: pytest.fail("no tune in this test"))
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        lambda *a: pytest.fail("a host's script is not looked for here"))
    (tmp_path / "ssh_config").write_text("")  # no ~/.ssh/config of the machine's user
    monkeypatch.setenv("STALLSCOPE_SSH_CONFIG", str(tmp_path / "ssh_config"))
    there = "/home/me/proj"
    remote = {"host": "gpu-box", "session": "/home/me/.cache/stallscope/sessions/train-1",
              "python": "~/envs/cuda/bin/python"}
    session = make_session(tmp_path / "mirror", fixture_path("kineto_nw0"),
                           Path(there) / "train.py", args=["--epochs", "1"], cwd=there,
                           python="/home/me/envs/cuda/bin/python3.11", remote=remote,
                           dataloaders=[{"site": "train.py:5", "file": f"{there}/train.py",
                                         "line": 5, "dataset": "Flowers"}])
    info = script_of(session)  # the one reader of run.json carries the remote facts
    assert (info.host, info.remote_python, info.remote_session) == (
        "gpu-box", "~/envs/cuda/bin/python", remote["session"])
    assert info.is_remote and info.script == f"{there}/train.py" and info.cwd == there
    asked: list[tuple[str, object]] = []

    def say(dialog, yes: bool):
        asked.append((dialog.shown_text(), window.fix_loop.tune_dialog))
        return yes

    with qtbot.waitSignal(window.sig_document_shown, timeout=60_000):
        window.open_path(str(session))
    card = dataloader_card(window)
    monkeypatch.setattr(confirm, "answer", lambda dialog: say(dialog, False))
    card.buttons["try_it"].click()  # No: nothing opens, nothing runs
    assert window.fix_loop.tune_dialog is None and len(asked) == 1
    monkeypatch.setattr(confirm, "answer", lambda dialog: say(dialog, True))
    with qtbot.waitSignal(window.fix_loop.sig_tune_opened, timeout=5_000) as opened:
        card.buttons["try_it"].click()
    shown, dialog_then = asked[1]
    assert dialog_then is None  # the confirmation came first
    # it names the host, and shows the command as it runs there
    assert "gpu-box" in shown.splitlines()[1] and "Host\ngpu-box" in shown
    assert ("ssh gpu-box\ncd /home/me/proj\n~/envs/cuda/bin/python /home/me/proj/train.py "
            "--epochs 1") in shown
    dialog = opened.args[0]
    qtbot.addWidget(dialog)
    rows = dialog.host_rows
    assert dialog.where.is_remote and rows.host() == "gpu-box"
    assert rows.python() == "~/envs/cuda/bin/python" and rows.cwd_edit.text() == there
    assert rows.script_edit.text() == f"{there}/train.py" and dialog.args == ["--epochs", "1"]
    assert dialog.windowTitle() == "Tune the DataLoader: train.py on gpu-box"
    cfg = dialog.config()  # what Start would run: the host's script, there
    assert str(cfg.script) == f"{there}/train.py" and cfg.where is not None
    assert (cfg.where.host, cfg.where.python, cfg.where.cwd) == (
        "gpu-box", "~/envs/cuda/bin/python", there)
    assert cfg.where.ssh_options[:2] == ("-F", str(tmp_path / "ssh_config"))
    shot(dialog, "tune_dialog_remote_prefilled")
    card.buttons["try_it"].click()  # the same dialog again, not asked twice
    assert window.fix_loop.tune_dialog is dialog and len(asked) == 2
    dialog.close()


@pytest.mark.runner  # the Dataset's file is imported in a child (factory_probe)
def test_try_it_on_a_bare_trace_asks_for_the_script(qtbot, window, project, open_and_wait,
                                                     monkeypatch, confirmed):
    open_and_wait(fixture_path("kineto_nw0"))
    asked = []

    def ask(parent, caption, start, filters):
        asked.append((caption, start))
        return answer.pop(0), ""

    answer = ["", str(project / "train.py")]
    monkeypatch.setattr(QFileDialog, "getOpenFileName", ask)
    card = dataloader_card(window)
    card.buttons["try_it"].click()  # cancelled: nothing opens
    assert window.fix_loop.tune_dialog is None and len(asked) == 1
    assert asked[0][1] == str(fixture_path("kineto_nw0").parent)
    card.buttons["try_it"].click()
    dialog = window.fix_loop.tune_dialog
    qtbot.addWidget(dialog)
    assert dialog.script == str((project / "train.py").resolve()) and dialog.args == []
    assert dialog.cwd == str(project)
    dialog.close()
    # the script given for this trace is remembered: the LMDB route uses it without asking
    # for it again (the import of its Dataset's file is confirmed, and probed in a child)
    with qtbot.waitSignal(window.fix_loop.sig_wizard_opened, timeout=120_000):
        window.fix_loop.open_lmdb()
    wizard = window.fix_loop.wizard
    assert len(asked) == 2
    assert wizard.source_page.spec_edit.text() == f"{(project / 'data.py').resolve()}:make_flowers"
    wizard.close()


def test_compare_before_after_opens_the_compare_view(qtbot, window, tmp_path, confirmed):
    before = make_session(tmp_path / "t1", fixture_path("kineto_nw0"))
    after = make_session(tmp_path / "t2", fixture_path("kineto_nw4_worker0.1623212756351"))
    dialog = window.fix_loop.try_it(str(Path(__file__)))  # wired as "Try it" wires it
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(window.sig_compare_shown, timeout=120_000) as shown:
        dialog.sig_compare_requested.emit(str(before), str(after))
    base, best = shown.args[0]
    assert base.trace.path.name == best.trace.path.name == "train.1.pt.trace.json.gz"
    assert Path(base.trace.path).parent.parent == before
    assert Path(best.trace.path).parent.parent == after
    assert window.tabs.currentWidget() is window.compare
    # the trials' traces share a name: their sessions tell them apart
    assert window.compare.heading.text() == ("t1/train.1.pt.trace.json.gz  →  "
                                             "t2/train.1.pt.trace.json.gz")
    step = window.compare.table.metric_by_key("step_ms")
    assert step.before == pytest.approx(step_ms(base)) and step.after == pytest.approx(
        step_ms(best))
    assert step.after < step.before  # num_workers=4 is the faster one
    shot(window, "compare_before_after")


def test_a_baseline_that_fails_to_open_compares_nothing(qtbot, window, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with qtbot.waitSignal(window.controller.sig_load_failed, timeout=30_000):
        window.fix_loop.compare_sessions(str(empty), str(tmp_path / "t2"))
    assert window.fix_loop._after is None and window.tabs.indexOf(window.compare) < 0


# ------------------------------------------------------------------ LMDB

@pytest.mark.runner  # the Dataset's file is imported in a child (factory_probe)
def test_the_cards_lmdb_mention_opens_the_wizard_with_the_dataset(qtbot, window, session,
                                                                  project, confirmed):
    with qtbot.waitSignal(window.sig_document_shown, timeout=60_000):
        window.open_path(str(session))
    card = dataloader_card(window)
    if 'href="#more"' in card.fix.text():  # a folded card: its "more" unfolds the whole fix
        card.fix.linkActivated.emit("#more")
    assert '<a href="lmdb">LMDB wizard</a>' in card.fix.text()
    with qtbot.waitSignal(window.fix_loop.sig_wizard_opened, timeout=120_000) as opened:
        card.fix.linkActivated.emit("lmdb")  # what a click on the link emits
    wizard = opened.args[0]
    expected = f"{(project / 'data.py').resolve()}:make_flowers"
    assert wizard.source_page.spec_edit.text() == expected and wizard.isVisible()
    shot(wizard, "lmdb_wizard_prefilled")
    wizard.close()
    with qtbot.waitSignal(window.fix_loop.sig_wizard_opened, timeout=120_000) as opened:
        card.buttons["lmdb"].click()
    assert opened.args[0].source_page.spec_edit.text() == expected
    opened.args[0].close()


def test_no_script_no_source_and_the_compare_panels_have_no_buttons(qtbot, window,
                                                                    open_and_wait):
    open_and_wait(fixture_path("kineto_nw0"))
    wizard = window.fix_loop.open_lmdb()
    assert wizard.source_page.spec_edit.text() == ""
    assert "No Dataset found" in window.status_bar.currentMessage()
    wizard.close()
    with qtbot.waitSignal(window.sig_compare_shown, timeout=60_000):
        window.open_compare(str(fixture_path("kineto_nw4_worker0.1623212756351")))
    for panel in (window.compare.before, window.compare.after):
        assert all(not card.buttons for card in panel.advice_cards)


# ------------------------------------------------------------------ a session from elsewhere

MARKER_PY = '''import os
from pathlib import Path

Path(__file__).with_name("imported-by").write_text(str(os.getpid()))


class Flowers:
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return i
'''


@pytest.fixture
def received(tmp_path, project):
    """A session from another machine: its interpreter, folder and script are not here; the
    Dataset's file is, and it leaves a mark when imported."""
    (project / "data.py").write_text(MARKER_PY)
    return make_session(tmp_path / "received", fixture_path("kineto_nw0"),
                        Path("/their/home/train.py"), python="/their/venv/bin/python",
                        cwd="/their/home", args=["--data", "/their/data"],
                        dataloaders=[{"site": "train.py:5", "file": str(project / "data.py"),
                                      "line": 5, "dataset": "Flowers"}])


@pytest.mark.runner  # once confirmed, the Dataset's file is imported in a child (factory_probe)
def test_a_received_session_runs_nothing_of_its_own_without_confirmation(
        qtbot, window, received, project, monkeypatch):
    asked: list[str] = []
    answers: list[bool] = []

    def answer(dialog):
        asked.append(dialog.shown_text())
        return answers.pop(0)

    monkeypatch.setattr(confirm, "answer", answer)
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        lambda *a, **k: (str(project / "train.py"), ""))
    monkeypatch.setattr(TuneDialog, "start", lambda self: pytest.fail("no tune in this test"))
    with qtbot.waitSignal(window.sig_document_shown, timeout=60_000):
        window.open_path(str(received))

    # Try it: the script is missing here, the user picks their own; the confirmation shows the
    # session's interpreter and folder as text, and they are not used
    answers.append(False)
    assert window.fix_loop.try_it() is None and window.fix_loop.tune_dialog is None
    assert "/their/venv/bin/python" in asked[-1] and "/their/home" in asked[-1]
    assert "--data /their/data" in asked[-1] and str(project / "train.py") in asked[-1]
    answers.append(True)
    dialog = window.fix_loop.try_it()
    qtbot.addWidget(dialog)
    assert dialog.python == sys.executable and dialog.cwd == str(project)
    assert dialog.script == str((project / "train.py").resolve())
    assert dialog.args == ["--data", "/their/data"]
    dialog.close()

    # Convert to LMDB: nothing is imported until the button naming the file is pressed; then
    # it is imported in a child process, never in the app
    marker = project / "imported-by"
    answers.append(False)
    wizard = window.fix_loop.open_lmdb()
    assert "Import data.py" in asked[-1] and str(project / "data.py") in asked[-1]
    assert wizard.source_page.spec_edit.text() == "" and not marker.exists()
    wizard.close()
    answers.append(True)
    with qtbot.waitSignal(window.fix_loop.sig_probe_finished, timeout=120_000) as probed:
        assert window.fix_loop.open_lmdb() is None
    facts = probed.args[0]
    assert facts.ok and facts.kind == "Flowers" and facts.length == 4
    assert int(marker.read_text()) != os.getpid()
    assert window.fix_loop.wizard.source_page.spec_edit.text() == f"{project / 'data.py'}:Flowers"
    window.fix_loop.wizard.close()


def test_install_line_profiler_shows_the_interpreter_and_asks(qtbot, window, monkeypatch):
    asked: list[str] = []
    monkeypatch.setattr(confirm, "answer", lambda d: asked.append(d.shown_text()) or False)
    window.heatmaps.show_line_profiler_missing("/their/venv/bin/python")
    banner = window.heatmaps.view.missing
    banner.button.click()
    assert asked and "/their/venv/bin/python -m pip install line_profiler" in asked[0]
    assert window.heatmaps.stats.process is None  # nothing ran
    assert banner.button.isEnabled() and banner.button.text() == "Install line_profiler"
