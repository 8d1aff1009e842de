"""What a run is: where (this computer or a remote host), the script, its interpreter, schedule
and options (a RunRequest), and where the app finds interpreters and keeps the demo's sessions.
The Run dialog fills one; the run view runs it through the launcher (core/launch).

For a remote run (`host` set) the script, the interpreter and the working folder are the host's,
kept as the user typed them (the host's shell expands `~`); the session folder is the local
mirror."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from PySide6.QtCore import QSettings, QStandardPaths

from stallscope.core.capture import options as run_options
from stallscope.core.launch import Job, Where
from stallscope.resources import RESOURCES

DEMO_SCRIPT = RESOURCES / "demo" / "train_demo.py"
DEFAULT_OPTIONS = {"profile_memory": True, "record_shapes": False, "with_stack": False,
                   "stop_after_window": True, "nproc_per_node": 1, "lineprof": "off",
                   "lineprof_depth": 0, "sets": []}
TORCH_PROBE = ("import sys\ntry:\n    import torch\nexcept ImportError as e:\n"
               "    print('NO', e); sys.exit(0)\n"
               "print('OK', torch.__version__, int(torch.cuda.is_available()))")


def default_python() -> str:
    """This app's interpreter; a frozen (PyInstaller) app has none: the first python on PATH."""
    if not getattr(sys, "frozen", False):
        return sys.executable
    return shutil.which("python3") or shutil.which("python") or "python3"


@dataclass
class RunRequest:
    script: str
    args: list[str] = field(default_factory=list)
    cwd: str = ""
    python: str = field(default_factory=default_python)
    env: dict[str, str] = field(default_factory=dict)
    schedule: dict[str, int] = field(default_factory=lambda: dict(run_options.DEFAULT_SCHEDULE))
    options: dict = field(default_factory=lambda: dict(DEFAULT_OPTIONS))
    session: str = ""       # the exact session folder; empty: a new one under session_root
    session_root: str = ""  # empty: the user's data folder (capture.options.sessions_root)
    host: str = ""          # empty: this computer; else what the user types after `ssh`
    ssh_options: list[str] = field(default_factory=list)  # e.g. ["-F", "ssh_config"]
    remote_cache: str = ""  # empty: the launcher's (~/.cache/stallscope on the host)

    @property
    def is_remote(self) -> bool:
        return bool(self.host)

    @property
    def workdir(self) -> Path:
        return Path(self.cwd) if self.cwd else Path(self.script).resolve().parent

    def new_session_dir(self) -> Path:
        if self.session:
            return Path(self.session).expanduser().resolve()
        return run_options.default_session_dir(self.script, self.session_root or None)

    def where(self) -> Where:
        """Where the launcher runs it: this computer in the working folder, or the host."""
        if self.is_remote:
            return Where(host=self.host, python=self.python or None, cwd=self.cwd or None,
                         ssh_options=ssh_env_options() + tuple(self.ssh_options),
                         cache=self.remote_cache or None)
        return Where(python=self.python, cwd=str(self.workdir))

    def job(self, session: Path) -> Job:
        """What the launcher runs: the runner's options (the runner leads its own process
        group, so Stop ends everything the script started)."""
        script = self.script if self.is_remote else str(Path(self.script).resolve())
        return Job(script=script, args=list(self.args), env=dict(self.env),
                   schedule=dict(self.schedule), session=Path(session),
                   options={**DEFAULT_OPTIONS, **self.options, "process_group": True})

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> RunRequest:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        req = cls(**known)
        req.schedule = {**run_options.DEFAULT_SCHEDULE, **(req.schedule or {})}
        req.options = {**DEFAULT_OPTIONS, **(req.options or {})}
        return req


def ssh_env_options() -> tuple[str, ...]:
    """STALLSCOPE_SSH_CONFIG=FILE adds `-F FILE` to ssh, as it does for the CLI."""
    config = os.environ.get("STALLSCOPE_SSH_CONFIG")
    return ("-F", config) if config else ()


def sessions_root() -> Path:
    """Where the app keeps the sessions it starts on its own (the demo's):
    ~/.local/share/stallscope/sessions on Linux (one "stallscope", whatever the app's
    organisation name)."""
    data = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericDataLocation)
    return (Path(data) if data else Path.home() / ".local" / "share") / "stallscope" / "sessions"


def demo_request() -> RunRequest:
    """The bundled demo, run by this app's own interpreter into the user's data folder."""
    root = sessions_root()
    return RunRequest(script=str(DEMO_SCRIPT), cwd=str(DEMO_SCRIPT.parent),
                      python=default_python(), session_root=str(root))


def detect_interpreters(script: str = "") -> list[str]:
    """Likely interpreters: this app's, environments next to the script, the active ones."""
    found = [default_python()]
    roots = []
    if script:
        roots = [Path(script).resolve().parent, *list(Path(script).resolve().parents)[1:4]]
    for root in roots:
        for env in (".venv", "venv", "env"):
            found.append(str(root / env / "bin" / "python"))
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        if os.environ.get(var):
            found.append(str(Path(os.environ[var]) / "bin" / "python"))
    for name in ("python3", "python"):
        which = shutil.which(name)
        if which:
            found.append(which)
    out: list[str] = []
    for p in found:
        if p not in out and Path(p).is_file() and os.access(p, os.X_OK):
            out.append(p)
    return out


def run_settings() -> QSettings:
    """Run settings live with the rest of stallscope's config (tests point it at a tmp dir)."""
    from stallscope.core.recent import config_dir

    return QSettings(str(config_dir() / "runs.ini"), QSettings.Format.IniFormat)


def settings_key(script: str, host: str = "") -> str:
    """Where a script's last request is remembered: a local script by its resolved path, a
    remote one by host and path as typed."""
    name = f"{host}:{script}" if host else str(Path(script).resolve())
    return "runs/" + hashlib.sha1(name.encode()).hexdigest()[:16]


def parse_env(text: str) -> dict[str, str]:
    env = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip() or " " in key.strip():
            raise ValueError(f"environment line {n}: expected NAME=value, got {line!r}")
        env[key.strip()] = value
    return env
