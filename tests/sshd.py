"""A real OpenSSH server on 127.0.0.1 for the remote tests: a throw-away host key and client
key in a temporary folder, an sshd on a free port, and the client's ssh_config (Host alias,
Port, IdentityFile, known_hosts holding the host key, BatchMode). Never a mock of ssh.

    server = Sshd.start(tmp)        # skips when /usr/sbin/sshd is missing (fails under CI=true)
    server.options                  # ("-F", ssh_config): what the launcher passes to ssh
    server.alias                    # the Host name the config defines
    server.stop()
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = Path("/usr/sbin/sshd")
ALIAS = "stallscope-test"


def missing(what: str) -> None:
    """Skip with the reason, or fail under CI (CI must hold openssh-server)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what}: CI must install openssh-server and openssh-client")
    pytest.skip(f"{what} (install openssh-server and openssh-client to run the remote tests)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "stallscope-test",
                    "-f", str(path)], check=True, stdin=subprocess.DEVNULL)
    return path.with_suffix(".pub").read_text().strip()


@dataclass
class Sshd:
    folder: Path
    port: int
    proc: subprocess.Popen
    config: Path
    alias: str = ALIAS

    @property
    def options(self) -> tuple[str, ...]:
        return ("-F", str(self.config))

    def ssh_config(self, name: str, **changes: str) -> Path:
        """Another client config (a refused key, an empty known_hosts, ...)."""
        text = self.config.read_text()
        for key, value in changes.items():
            lines = [line for line in text.splitlines() if not line.strip().startswith(key)]
            text = "\n".join(lines + [f"  {key} {value}"]) + "\n"
        path = self.folder / name
        path.write_text(text)
        return path

    @classmethod
    def start(cls, folder: Path) -> Sshd:
        if not SSHD.exists():
            missing(f"{SSHD} is missing")
        for tool in ("ssh", "ssh-keygen"):
            if subprocess.run(["which", tool], capture_output=True).returncode:
                missing(f"no {tool} here")
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
        folder.mkdir(parents=True, exist_ok=True)
        host_pub = keygen(folder / "host_key")
        (folder / "authorized_keys").write_text(keygen(folder / "client_key") + "\n")
        port = free_port()
        sshd_config = folder / "sshd_config"
        sshd_config.write_text(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {folder / 'host_key'}
PidFile {folder / 'sshd.pid'}
AuthorizedKeysFile {folder / 'authorized_keys'}
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
LogLevel ERROR
""")
        (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub}\n")
        config = folder / "ssh_config"
        config.write_text(f"""Host {ALIAS}
  HostName 127.0.0.1
  Port {port}
  User {getpass.getuser()}
  IdentityFile {folder / 'client_key'}
  IdentitiesOnly yes
  UserKnownHostsFile {folder / 'known_hosts'}
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel ERROR
""")
        proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(sshd_config)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=open(folder / "sshd.log", "wb"))  # noqa: SIM115
        server = cls(folder, port, proc, config)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"sshd did not start: {(folder / 'sshd.log').read_text()[-500:]}")
            ok = subprocess.run(["ssh", "-F", str(config), ALIAS, "true"], capture_output=True,
                                stdin=subprocess.DEVNULL)
            if ok.returncode == 0:
                return server
            time.sleep(0.2)
        server.stop()
        pytest.fail(f"cannot log in to the test sshd: {ok.stderr.decode()[-500:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
