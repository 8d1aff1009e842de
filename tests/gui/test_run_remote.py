"""A run on another host from the app (issue 32): the Run view's controller runs a script over a
real OpenSSH server on 127.0.0.1 (tests/sshd.py): live step figures, the trace arrives and is
signalled with its local path, Stop ends the remote process group, and a dropped connection
(the local ssh killed) then Reconnect loses no step or trace and takes none twice. The "host"
is this machine, so a test can look at the remote session's files too."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import json
import signal
import sys
from pathlib import Path

import psutil
import pytest
from PySide6.QtCore import Qt
from scripts import training
from shots import save_shot

from stallscope.core.session.reader import open_session
from stallscope.gui.controllers.run import RunController
from stallscope.gui.run_request import RunRequest
from stallscope.gui.views.run import RunView

pytestmark = pytest.mark.runner  # runners under ssh

WAIT_MS = 120_000  # a loaded 2-core machine: ssh, deploy, torch import


def remote_request(server, tmp_path, source: str, **options) -> RunRequest:
    script = tmp_path / "train.py"
    script.write_text(source)
    return RunRequest(script=str(script), host=server.alias, python=sys.executable,
                      ssh_options=list(server.options), remote_cache=str(tmp_path / "cache"),
                      session=str(tmp_path / "mirror"),
                      schedule={"wait": 1, "warmup": 1, "active": 1, "repeat": 1},
                      options={"stop_after_window": False, **options})


def bound_view(qtbot, grace_s: float = 30.0) -> tuple[RunView, RunController]:
    """A grace long enough for a loaded machine: the runner ends on SIGTERM by itself (at the
    default 5 s a runner slowed down by load is SIGKILLed after writing its record: -9)."""
    view = RunView()
    qtbot.addWidget(view)
    run = RunController(view, grace_s=grace_s)
    view.bind(run)
    view.resize(1100, 760)
    view.show()
    return view, run


def remote_steps(session: Path) -> list[int]:
    return [e["n"] for e in open_session(session).events
            if e.get("event") == "step" and e.get("rank") is None]


def test_a_remote_run_is_followed_live_and_stopped(qtbot, server, tmp_path):
    source = training(forever=True, loader="num_workers=2", step_s=0.05,
                      in_step='print("loss <b>x</b>", round(loss.item(), 4), flush=True)')
    view, run = bound_view(qtbot)
    with qtbot.waitSignal(run.sig_trace_ready, timeout=WAIT_MS) as ready:
        run.start(remote_request(server, tmp_path, source))
        assert run.is_running and view.stop_button.isEnabled()  # Stop while ssh connects
        assert view.status.text() == f"Connecting to {server.alias} …"
    trace = Path(ready.args[0])
    remote = Path(run.handle.remote_session)
    assert trace.parent == tmp_path / "mirror" / "traces" and trace.is_file()
    assert trace.read_bytes() == (remote / "traces" / trace.name).read_bytes()
    qtbot.waitUntil(lambda: run.series.n >= 4, timeout=WAIT_MS)
    assert view.figures.text().startswith("step ") and view.steps >= 4  # live step figures
    qtbot.waitUntil(lambda: "loss <b>x</b>" in view.console.toPlainText(), timeout=WAIT_MS)
    assert not view.reconnect_button.isVisible()
    save_shot(view, "run_view_remote")

    pid = int((remote / ".runner.pid").read_text())

    def tree() -> list:
        return [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]

    # the runner and its two DataLoader workers, on the "host" (between two epochs the
    # workers are started anew: wait for them rather than look once)
    qtbot.waitUntil(lambda: len(tree()) >= 3, timeout=WAIT_MS)
    group = tree()
    view.stop_button.click()
    assert not view.stop_button.isEnabled() and not run.stoppable
    qtbot.waitUntil(lambda: run.exit_code is not None or run.can_reconnect, timeout=WAIT_MS)
    assert run.exit_code == 128 + signal.SIGTERM, view.status.text()
    _, alive = psutil.wait_procs(group, timeout=15)
    assert not alive, f"left behind on the host: {alive}"
    assert "Finished: stopped by SIGTERM" in view.status.text()
    assert open_session(tmp_path / "mirror").run["remote"]["host"] == server.alias
    assert remote_steps(tmp_path / "mirror") == remote_steps(remote)


def test_reconnect_after_a_dropped_connection_loses_nothing(qtbot, server, tmp_path):
    source = training(items=96, step_s=0.3)  # 12 steps, ~4 s: the drop comes at step 2
    view, run = bound_view(qtbot)
    traces: list[str] = []
    run.sig_trace_ready.connect(traces.append)
    run.start(remote_request(server, tmp_path, source))
    qtbot.waitUntil(lambda: run.series.n >= 2, timeout=WAIT_MS)
    remote = Path(run.handle.remote_session)
    with qtbot.waitSignal(run.sig_reconnectable, timeout=WAIT_MS) as lost:
        os.kill(run.handle.transport_pid, signal.SIGKILL)  # the laptop's ssh goes away
    assert lost.args == [True] and view.reconnect_button.isVisible()
    assert view.status.text() == (f"Connection to {server.alias} lost: the run goes on there. "
                                  "Reconnect follows it again, fetching what it wrote meanwhile.")
    assert not view.stop_button.isEnabled() and run.exit_code is None and run.can_reconnect
    qtbot.waitUntil(lambda: (remote / ".runner.rc").exists(), timeout=WAIT_MS)  # it went on
    assert run.series.n < len(remote_steps(remote)) == 12
    save_shot(view, "run_view_connection_lost")

    with qtbot.waitSignal(run.sig_run_finished, timeout=WAIT_MS) as done:
        view.reconnect_button.click()
        assert not view.reconnect_button.isVisible()
    assert done.args == [0]
    assert run.series.n == 12  # every step once: none lost, none twice
    mirror = tmp_path / "mirror"
    assert remote_steps(mirror) == remote_steps(remote) == list(range(12))
    assert [Path(t).name for t in traces] == [p.name for p in open_session(remote).traces()]
    assert len(traces) == 1 and Path(traces[0]).read_bytes() == (
        remote / "traces" / Path(traces[0]).name).read_bytes()
    assert "Finished: completed" in view.status.text()


def test_an_unknown_host_key_is_one_line_with_what_to_do(qtbot, server, tmp_path, monkeypatch):
    """ssh never asks (BatchMode): the app shows its failure in one line, no traceback.
    STALLSCOPE_SSH_CONFIG gives ssh its config, as for the CLI."""
    (tmp_path / "empty_known_hosts").write_text("")
    monkeypatch.setenv("STALLSCOPE_SSH_CONFIG", str(server.ssh_config(
        "unknown", UserKnownHostsFile=str(tmp_path / "empty_known_hosts"))))
    request = remote_request(server, tmp_path, "print(1)\n")
    request.ssh_options = []
    view, run = bound_view(qtbot)
    with qtbot.waitSignal(run.sig_run_finished, timeout=WAIT_MS) as done:
        run.start(request)
    assert done.args == [-1] and not view.stop_button.isEnabled()
    console = view.console.toPlainText().strip().splitlines()
    assert len(console) == 1 and console[0].startswith("stallscope: "), console
    assert f"run `ssh {server.alias}` once to accept it" in console[0] and "(ssh: " in console[0]
    assert view.status.text() == "Not started: " + console[0].removeprefix("stallscope: ")
    assert "Traceback" not in view.console.toPlainText()
    save_shot(view, "run_view_ssh_refused")


def test_the_run_dialog_asks_the_host_for_torch(qtbot, server, tmp_path, monkeypatch):
    """Where: a remote host: the dialog asks the host's interpreter for torch over ssh (as the
    local probe does here), or shows ssh's failure in one line with what to do."""
    from PySide6.QtCore import QSettings

    from stallscope.gui.dialogs.run import RunDialog

    monkeypatch.setenv("STALLSCOPE_SSH_CONFIG", str(server.config))
    settings = QSettings(str(tmp_path / "runs.ini"), QSettings.Format.IniFormat)
    settings.setValue("runs/last_host", server.alias)  # opens on the host, no local probe
    dialog = RunDialog(settings=settings)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.where.is_remote and dialog.python_combo.currentText() == "python3"
    dialog.python_combo.setCurrentText(sys.executable)
    status = dialog.python_status
    qtbot.waitUntil(lambda: status.text().startswith("torch "), timeout=WAIT_MS)
    assert status.text().endswith(f"· CUDA no on {server.alias}")
    save_shot(dialog, "run_dialog_remote_probe")
    dialog.python_combo.setCurrentText(str(tmp_path / "no-python"))
    qtbot.waitUntil(lambda: "could not run the interpreter" in status.text(), timeout=WAIT_MS)
    dialog.host_combo.setCurrentText("no-such-host.invalid")
    dialog.host_combo.lineEdit().editingFinished.emit()  # another host: python3 there
    qtbot.waitUntil(lambda: "host no-such-host.invalid not found" in status.text(),
                    timeout=WAIT_MS)
    assert "(ssh: " in status.text() and "\n" not in status.text()


def test_attach_follows_a_run_started_elsewhere(qtbot, server, tmp_path, monkeypatch):
    """Run > Attach to remote run…: a run the CLI started (its connection gone, the run went on
    and ended there) is followed from the app into a mirror of its own: every step and trace
    once; attaching again to the same mirror adds nothing."""
    from stallscope.core.launch import Job, Where, start
    from stallscope.gui.controllers.run_remote import mirror_of
    from stallscope.gui.dialogs.attach import split_target

    where = Where(host=server.alias, python=sys.executable, ssh_options=server.options,
                  cache=str(tmp_path / "cache"))
    script = tmp_path / "train.py"
    script.write_text(training(items=64, step_s=0.2))  # 8 steps
    cli_run = start(where, Job(script=str(script), session=tmp_path / "cli-mirror",
                               schedule={"wait": 1, "warmup": 1, "active": 1},
                               options={"stop_after_window": False}))
    os.kill(cli_run.transport_pid, signal.SIGKILL)  # that terminal went away at once
    remote = Path(cli_run.remote_session)
    qtbot.waitUntil(lambda: (remote / ".runner.rc").exists(), timeout=WAIT_MS)
    assert split_target("", f"{server.alias}:{remote}") == (server.alias, str(remote))

    local = mirror_of(server.alias, str(remote), tmp_path / "sessions")
    assert local == tmp_path / "sessions" / remote.name
    view, run = bound_view(qtbot)
    traces: list[str] = []
    run.sig_trace_ready.connect(traces.append)
    with qtbot.waitSignal(run.sig_run_finished, timeout=WAIT_MS) as done:
        assert run.attach(where, str(remote), local)
    assert done.args == [0] and "Finished: completed" in view.status.text()
    assert run.series.n == 8 and remote_steps(local) == remote_steps(remote) == list(range(8))
    assert [Path(t).name for t in traces] == [p.name for p in open_session(remote).traces()]
    assert len(traces) == 1

    # the same run again: its mirror holds all of it, shown without connecting
    assert mirror_of(server.alias, str(remote), tmp_path / "sessions") == local
    view, run = bound_view(qtbot)
    assert not run.attach(where, str(remote), local) and not run.is_running
    assert run.series.n == 8 and "Finished: completed" in view.status.text()
    assert remote_steps(local) == list(range(8))
    assert mirror_of("other-host", str(remote), tmp_path / "sessions") != local  # a new one


def mirror(tmp_path, remote: dict, finished: bool = False) -> Path:
    """A mirrored session as a dropped connection leaves it: run.json names the host."""
    session = tmp_path / "mirror"
    session.mkdir()
    (session / "run.json").write_text(json.dumps({"script": "/r/train.py", "remote": remote}))
    lines = [{"event": "step", "t": 1.0 + n, "n": n, "wall_ms": 10.0, "data_wait_ms": 1.0}
             for n in range(3)]
    if finished:
        lines.append({"event": "finished", "t": 9.0, "rc": 0, "reason": "completed"})
    (session / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    return session


def test_a_replayed_mirror_offers_reconnect_to_its_host(qtbot, tmp_path):
    """An unfinished mirror opened later (File > Open session) offers Reconnect; its run.json
    is untrusted: the host shows as plain text, and a host ssh would read as an option is
    never offered."""
    view, run = bound_view(qtbot)
    run.replay(mirror(tmp_path, {"host": "<b>gpu</b>", "session": "/r/s", "python": "py3"}))
    assert view.reconnect_button.isVisible() and run.can_reconnect
    where, remote_session = run.remote
    assert (where.host, where.python, remote_session) == ("<b>gpu</b>", "py3", "/r/s")
    assert view.status.textFormat() == Qt.TextFormat.PlainText
    assert "still be going on on <b>gpu</b>; Reconnect follows it" in view.status.text()
    save_shot(view, "run_view_mirror_reconnect")

    cases = (({"host": "-oProxyCommand=touch x", "session": "/r/s"}, False),
             ({"host": "gpu", "session": ""}, False),
             ({"host": "gpu", "session": "/r/s"}, True))  # it ended: nothing to follow
    for n, (remote, finished) in enumerate(cases):
        view, run = bound_view(qtbot)
        (tmp_path / str(n)).mkdir()
        run.replay(mirror(tmp_path / str(n), remote, finished))
        assert not view.reconnect_button.isVisible() and run.remote is None, remote
        assert not run.reconnect()
