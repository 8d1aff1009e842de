"""The Run dialog's Where: this computer, or a remote host reached with the user's own `ssh`.

    hosts = offered_hosts(memory)        # the hosts used before, then ~/.ssh/config's aliases
    memory = HostMemory(settings)        # per host: its interpreters, working folder, last script
    memory.remember(host, python, cwd, script)
    check_host(text)                     # ValueError with one line when it cannot be a host
    rows = HostForm(form, memory)        # a remote host's rows: the Run and Tune dialogs' Where
    rows.fill(host, script, cwd, python); rows.fields()  # -> where_fields(...) of the rows

A host is what the user types after `ssh` (an alias, `user@host`): ssh reads their config,
keys and agent; the app stores no password and passes the name as one argument, never through
a shell. Nothing here connects but HostForm's interpreter check (run_probe, over ssh).
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
import shutil
from pathlib import Path

from PySide6.QtCore import QObject, QSettings, Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QRadioButton,
    QWidget,
)

from stallscope.core.launch import Where
from stallscope.gui.colors import BETTER_COLOR, MUTED_TEXT, error_text
from stallscope.gui.dialogs.fields import refill, row_widget
from stallscope.gui.dialogs.run_probe import TorchProbe
from stallscope.gui.run_request import ssh_env_options

REMOTE_PYTHON = "python3"  # the remote interpreter when the user names none
MAX_CONFIG_BYTES = 1 << 20
MAX_REMEMBERED = 8         # interpreters and hosts offered, the newest first
HOST_HINT = ("Your own ssh: ~/.ssh/config, keys and agent apply. Nothing to install there but "
             "torch; the session is written there and mirrored here.")


def ssh_config_hosts(path: Path | None = None, depth: int = 0) -> list[str]:
    """The `Host` aliases of an OpenSSH client config (and the files it Includes), without
    patterns (`*`, `?`, `!`): the names a user can type after `ssh`."""
    path = path or Path.home() / ".ssh" / "config"
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_CONFIG_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return []
    hosts: list[str] = []
    for line in text.splitlines():
        m = re.match(r"(\w+)\s*(?:=\s*|\s)(.*)", line.strip())
        if m is None:
            continue
        key, words = m[1].lower(), [w.strip('"') for w in m[2].split("#", 1)[0].split()]
        if key == "host":
            hosts += [w for w in words if w and not any(c in w for c in "*?!")]
        elif key == "include" and depth < 4:
            for pattern in words:
                full = Path(pattern).expanduser()
                full = full if full.is_absolute() else Path.home() / ".ssh" / full
                for found in sorted(glob.glob(str(full))):
                    hosts += ssh_config_hosts(Path(found), depth + 1)
    return list(dict.fromkeys(hosts))


def placeholders(remote: bool) -> tuple[str, str]:
    """The script's and the working folder's placeholder texts."""
    if remote:
        return ("~/proj/train.py: the script's path on the host",
                "a folder on the host (default: your home there)")
    return "train.py: your unmodified training script", "the script's folder"


def where_fields(host: str | None, script: str, cwd: str, python: str) -> dict:
    """The request's host, script, cwd and python from the dialog's texts (host None: this
    computer), or ValueError with one line. A local script, folder and interpreter are checked
    here; a remote one is the host's to check when the run starts."""
    script, cwd, python = script.strip(), cwd.strip(), python.strip()
    if host is not None:
        host = check_host(host)
        if not script:
            raise ValueError(f"type the script's path on {host}")
        return {"host": host, "script": script, "cwd": cwd, "python": python or REMOTE_PYTHON}
    if not script:
        raise ValueError("choose the training script to run")
    if not Path(script).is_file():
        raise ValueError(f"{script}: no such script")
    if cwd and not Path(cwd).is_dir():
        raise ValueError(f"{cwd}: working folder does not exist")
    if not python or not (Path(python).is_file() or shutil.which(python)):
        raise ValueError(f"{python or '(empty)'}: no such Python interpreter")
    return {"script": str(Path(script).resolve()), "cwd": cwd, "python": python}


def check_host(text: str) -> str:
    """`text` as a host name for ssh, or ValueError with one line (a name starting with `-`
    would be read by ssh as an option)."""
    host = text.strip()
    if not host:
        raise ValueError("remote host: name the host, as you would type it after ssh")
    if host.startswith("-") or any(c.isspace() or ord(c) < 32 for c in host):
        raise ValueError(f"remote host {host!r}: not a host name (no spaces, no leading '-')")
    return host


class HostMemory:
    """What the dialog remembers per host, in the run settings (one JSON value per host)."""

    def __init__(self, settings: QSettings) -> None:
        self.settings = settings

    def hosts(self) -> list[str]:
        """The hosts run on before, the newest first."""
        return [h for h in self._json("hosts/recent", []) if isinstance(h, str)]

    def of(self, host: str) -> dict:
        data = self._json(_key(host), {})
        return data if isinstance(data, dict) else {}

    def pythons(self, host: str) -> list[str]:
        found = [p for p in self.of(host).get("pythons", []) if isinstance(p, str) and p]
        return found or [REMOTE_PYTHON]

    def folder(self, host: str) -> str:
        return str(self.of(host).get("cwd", ""))

    def last_script(self, host: str) -> str:
        return str(self.of(host).get("script", ""))

    def remember(self, host: str, python: str, cwd: str, script: str) -> None:
        pythons = [python, *[p for p in self.pythons(host) if p != python]][:MAX_REMEMBERED]
        self.settings.setValue(_key(host), json.dumps(
            {"host": host, "pythons": pythons, "cwd": cwd, "script": script}))
        recent = [host, *[h for h in self.hosts() if h != host]][:MAX_REMEMBERED]
        self.settings.setValue("hosts/recent", json.dumps(recent))

    def _json(self, key: str, default):
        raw = self.settings.value(key)
        try:
            return json.loads(str(raw)) if raw else default
        except ValueError:
            return default


def _key(host: str) -> str:
    # a host may hold characters QSettings reads as groups ("/"): one hashed key per host
    return "hosts/" + hashlib.sha1(host.encode()).hexdigest()[:16]


def offered_hosts(memory: HostMemory, config: Path | None = None) -> list[str]:
    """The host combo's items: the hosts used before, then the ssh config's other aliases."""
    return list(dict.fromkeys([*memory.hosts(), *ssh_config_hosts(config)]))


class WhereChoice(QWidget):
    """"This computer" / "A remote host (SSH)"; sig_changed(remote) when the choice changes."""

    sig_changed = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.local = QRadioButton("This computer")
        self.remote = QRadioButton("A remote host (SSH)")
        self.remote.setToolTip("Run the script on a machine you reach with ssh (a GPU box, a "
                               "cloud VM): nothing to install there but torch")
        self.local.setChecked(True)
        group = QButtonGroup(self)
        group.addButton(self.local)
        group.addButton(self.remote)
        self.remote.toggled.connect(self.sig_changed)
        row = QHBoxLayout()
        row.addWidget(self.local)
        row.addWidget(self.remote)
        row.addStretch(1)
        inner = row_widget(row)
        outer = QHBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(inner)

    @property
    def is_remote(self) -> bool:
        return self.remote.isChecked()

    def set_remote(self, remote: bool) -> None:
        (self.remote if remote else self.local).setChecked(True)


def host_rows(form: QFormLayout, memory: HostMemory,
              hint_text: str = HOST_HINT) -> tuple[QComboBox, QLabel]:
    """The Host row (the hosts offered) and its hint below, added to `form`."""
    combo = host_combo(offered_hosts(memory))
    form.addRow("Host", combo)
    hint = QLabel(hint_text)
    hint.setObjectName("hint")
    hint.setStyleSheet(f"color: {MUTED_TEXT};")
    hint.setWordWrap(True)
    form.addRow("", hint)
    return combo, hint


def host_combo(hosts: list[str]) -> QComboBox:
    combo = QComboBox(editable=True)
    combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
    combo.addItems(hosts)
    combo.setCurrentIndex(-1)
    line = combo.lineEdit()
    if line is not None:
        line.setPlaceholderText("gpu-box or user@host: what you type after ssh")
    combo.setToolTip("A Host alias from ~/.ssh/config, or user@host")
    return combo


class HostForm(QObject):
    """A remote host's rows, the one set both the Run and the Tune dialog show for Where "A
    remote host": Host and its hint, the script's path there, its working folder, the
    interpreter and whether it has torch (TorchProbe over ssh, once the fields rest). Picking
    another host brings back its last script, folder and interpreters (HostMemory; a host with
    none: `default_script`, empty folder, python3) and says so (sig_host_chosen); leaving the
    same host's field keeps what was typed, as typed (the host's shell expands `~`)."""

    sig_host_chosen = Signal(str)  # the host whose remembered fields were just filled in

    def __init__(self, form: QFormLayout, memory: HostMemory, hint: str = HOST_HINT,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.form, self.memory = form, memory
        self.default_script = ""  # offered on a host that has no last script
        self.host_combo, self.hint = host_rows(form, memory, hint)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        script_hint, cwd_hint = placeholders(True)
        self.script_edit = QLineEdit(placeholderText=script_hint)
        form.addRow("Script", self.script_edit)
        self.cwd_edit = QLineEdit(placeholderText=cwd_hint)
        self.python_combo = QComboBox(editable=True)
        self.python_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.python_combo.setToolTip("The interpreter on the host (it needs torch, not "
                                     "stallscope); ~/ is the home there")
        folder = QHBoxLayout()
        folder.addWidget(self.cwd_edit, 3)
        folder.addSpacing(8)
        folder.addWidget(QLabel("Python"))
        folder.addWidget(self.python_combo, 2)
        self.folder_row = row_widget(folder)
        form.addRow("Working folder", self.folder_row)
        self.python_status = QLabel(" ")
        self.python_status.setObjectName("hint")
        self.python_status.setWordWrap(True)  # ssh's one line and what to do: two at most
        self.python_status.setMinimumHeight(2 * self.python_status.fontMetrics().lineSpacing())
        form.addRow("", self.python_status)
        self.probe = TorchProbe(self)
        self.probe.sig_result.connect(self._set_status)
        self._shown_host = ""
        self._active = False
        line = self.host_combo.lineEdit()
        assert line is not None  # host_rows makes an editable combo
        line.editingFinished.connect(self._host_chosen)
        self.host_combo.textActivated.connect(lambda _text: self._host_chosen())
        self.python_combo.currentTextChanged.connect(lambda _text: self.check())
        self._pythons("")

    def rows(self) -> list[QWidget]:
        """The form rows' fields (the folder's row holds the interpreter too)."""
        return [self.host_combo, self.hint, self.script_edit, self.folder_row,
                self.python_status]

    def set_active(self, active: bool) -> None:
        """Shown and checked (a remote host chosen), or hidden and quiet (this computer)."""
        self._active = active
        for widget in self.rows():
            self.form.setRowVisible(widget, active)
        if active:
            if not self.host():
                self.host_combo.setCurrentText(next(iter(self.memory.hosts()), ""))
            self._host_chosen()
            self.check()
        else:
            self.probe.stop()

    def fill(self, host: str, script: str, cwd: str, python: str) -> None:
        """Preselect a host and its fields (a session recorded there: its own)."""
        self._shown_host = host.strip()
        self.host_combo.setCurrentText(host)
        self.script_edit.setText(script)
        self.cwd_edit.setText(cwd)
        self._pythons(python)

    def host(self) -> str:
        return self.host_combo.currentText().strip()

    def python(self) -> str:
        return self.python_combo.currentText().strip() or REMOTE_PYTHON

    def fields(self) -> dict:
        """where_fields of the rows: host, script, cwd, python; ValueError with one line."""
        return where_fields(self.host(), self.script_edit.text(), self.cwd_edit.text(),
                            self.python())

    def where(self, ssh_options: tuple[str, ...] = (), cache: str = "") -> Where:
        """The host as the launcher takes it; STALLSCOPE_SSH_CONFIG's -F comes first, as for
        the CLI. ValueError with one line."""
        fields = self.fields()
        return Where(host=fields["host"], python=fields["python"], cwd=fields["cwd"] or None,
                     ssh_options=ssh_env_options() + tuple(ssh_options), cache=cache or None)

    def set_enabled(self, enabled: bool) -> None:
        for widget in (self.host_combo, self.script_edit, self.folder_row):
            widget.setEnabled(enabled)

    def remember(self) -> None:
        fields = self.fields()
        self.memory.remember(fields["host"], fields["python"], fields["cwd"], fields["script"])

    def set_python(self, python: str) -> None:
        """The interpreter shown (`python` first, then the host's others; empty: its last)."""
        self._pythons(python)

    def _host_chosen(self) -> None:
        host = self.host()
        if host == self._shown_host:
            return
        self._shown_host = host
        self.script_edit.setText(
            (self.memory.last_script(host) if host else "") or self.default_script)
        self.cwd_edit.setText(self.memory.folder(host) if host else "")
        self._pythons("")
        self.sig_host_chosen.emit(host)

    def _pythons(self, chosen: str) -> None:
        pythons = self.memory.pythons(self.host()) if self.host() else [REMOTE_PYTHON]
        if chosen and chosen not in pythons:
            pythons = [chosen, *pythons]
        refill(self.python_combo, [(p, p) for p in pythons])
        self.python_combo.setCurrentText(chosen or pythons[0])
        self.check()

    def check(self) -> None:
        """Ask the host's interpreter for torch (only while the rows are shown)."""
        if not self._active:
            return
        try:
            self.probe.check_remote(check_host(self.host()), self.python())
        except ValueError as exc:
            self.probe.stop()
            self._set_status(str(exc), None)

    def _set_status(self, text: str, ok: bool | None) -> None:
        color = {True: BETTER_COLOR, False: error_text(), None: MUTED_TEXT}[ok]
        self.python_status.setStyleSheet(f"color: {color};")
        self.python_status.setText(text)

    def stop(self) -> None:
        self.probe.stop()
