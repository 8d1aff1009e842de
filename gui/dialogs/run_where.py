"""The Run dialog's Where: this computer, or a remote host reached with the user's own `ssh`.

    hosts = offered_hosts(memory)        # the hosts used before, then ~/.ssh/config's aliases
    memory = HostMemory(settings)        # per host: its interpreters, working folder, last script
    memory.remember(host, python, cwd, script)
    check_host(text)                     # ValueError with one line when it cannot be a host

A host is what the user types after `ssh` (an alias, `user@host`): ssh reads their config,
keys and agent; the app stores no password and passes the name as one argument, never through
a shell. Nothing here connects.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
import shutil
from pathlib import Path

from PySide6.QtCore import QSettings, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QRadioButton,
    QWidget,
)

from stallscope.gui.colors import MUTED_TEXT
from stallscope.gui.dialogs.fields import row_widget

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


def host_rows(form: QFormLayout, memory: HostMemory) -> tuple[QComboBox, QLabel]:
    """The Host row (the hosts offered) and its hint below, added to `form`."""
    combo = host_combo(offered_hosts(memory))
    form.addRow("Host", combo)
    hint = QLabel(HOST_HINT)
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
