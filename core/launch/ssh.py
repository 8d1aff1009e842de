"""The user's own OpenSSH client: the command lines, remote quoting, the runner's deployment
and ssh's failures in one line with what to do.

ssh runs with `-o BatchMode=yes` (it never prompts: a missing key or an unknown host key is an
error, never a question nobody sees); host keys are checked as the user's configuration says.
~/.ssh/config aliases, keys, the agent, ProxyJump and ControlMaster apply as in a terminal.
Every remote word goes through `word()`: the remote shell sees it as one literal argument."""

from __future__ import annotations

import functools
import hashlib
import io
import shlex
import subprocess
import tarfile
import time
from pathlib import Path

from stallscope.core import __version__
from stallscope.core.capture import options as runner_options
from stallscope.core.errors import StallscopeError
from stallscope.core.launch.job import Where

CAPTURE = Path(runner_options.__file__).resolve().parent
DEFAULT_CACHE = "~/.cache/stallscope"
BATCH = ("-o", "BatchMode=yes")
AGENT = "stallscope agent: "  # how core/capture/remote_agent.py begins its one-line failures


def word(text: str) -> str:
    """One argument for the remote shell, exactly; a leading ~/ is the remote home."""
    if text == "~":
        return '"$HOME"'
    if text.startswith("~/"):
        return '"$HOME"/' + shlex.quote(text[2:])
    return shlex.quote(text)


def command(where: Where, remote: str) -> list[str]:
    """The local argv that runs `remote` (a shell command line) on where.host."""
    return ["ssh", *BATCH, *where.ssh_options, "--", str(where.host), remote]


def cache(where: Where) -> str:
    return (where.cache or DEFAULT_CACHE).rstrip("/") or "/"


def capture_files() -> list[Path]:
    return sorted(p for p in CAPTURE.rglob("*.py") if "__pycache__" not in p.parts)


@functools.lru_cache(maxsize=1)
def bundle() -> tuple[str, bytes]:
    """(folder name, tar of core/capture): runner-<version>-<hash>, reused while it matches."""
    digest = hashlib.sha256()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in capture_files():
            rel = path.relative_to(CAPTURE).as_posix()
            data = path.read_bytes()
            digest.update(rel.encode() + b"\0" + data + b"\0")
            info = tarfile.TarInfo(rel)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return f"runner-{__version__}-{digest.hexdigest()[:12]}", buffer.getvalue()


def deploy_line(where: Where, name: str) -> tuple[str, str]:
    """(shell line that unpacks the tar on stdin unless the folder is complete, the agent's
    remote path as a shell word)."""
    folder = f"{cache(where)}/{name}"
    q = word(folder)
    line = (f"if [ -f {q}/.complete ]; then cat >/dev/null; else mkdir -p {q} && "
            f"tar xf - -C {q} && touch {q}/.complete; fi")
    return line, word(f"{folder}/remote_agent.py")


def explain(host: str, stderr: str, rc: int) -> str:
    """ssh's failure as one line: what it said and what to do."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = lines[-1] if lines else f"exit code {rc}"
    text = " ".join(lines).lower()
    if "could not resolve hostname" in text or "name or service not known" in text:
        what = f"host {host} not found (check the name, or its Host entry in ~/.ssh/config)"
    elif "host key verification failed" in text or "no matching host key" in text \
            or "host key is not known" in text:
        what = f"{host}'s host key is not known here: run `ssh {host}` once to accept it"
    elif "permission denied" in text:
        what = (f"{host} refused the login: set up a key (ssh-copy-id {host}) or load it "
                f"into ssh-agent; stallscope never asks for a password")
    elif "connection refused" in text or "connection timed out" in text \
            or "no route to host" in text:
        what = f"cannot reach {host}"
    elif rc == 127 or "not found" in text:
        what = f"{host} could not run the interpreter (give --remote-python)"
    elif said.startswith(AGENT):  # the agent's own one line: what is wrong there
        return f"on {host}: {said.removeprefix(AGENT)}"
    elif rc != 255:  # the remote command failed, not ssh: the interpreter that runs the agent
        detail = f"exit code {rc}" + (f": {said}" if lines else "")
        return (f"on {host}: the interpreter failed ({detail}); give --remote-python a "
                "Python 3.8+ with torch")
    else:
        what = f"ssh {host} failed"
    return f"{what} (ssh: {said})"


def run(where: Where, remote: str, stdin: bytes = b"", timeout: float = 120) -> str:
    """Run `remote` on the host to its end; its stdout. A StallscopeError (one line) when
    ssh or the command fails; a Ctrl-C meanwhile is raised once it has ended (`run_whole`)."""
    out, interrupted = run_whole(where, remote, stdin, timeout)
    if interrupted:
        raise KeyboardInterrupt
    return out


def run_whole(where: Where, remote: str, stdin: bytes = b"",
              timeout: float = 120) -> tuple[str, bool]:
    """`run`, never cut short by Ctrl-C: (its stdout, whether a Ctrl-C came meanwhile). ssh
    runs in a session of its own, so a terminal's Ctrl-C reaches this process only, and the
    command finishes: a start cut short leaves a run going on the host that nobody sees (no
    folder to attach to, nothing to stop). The caller decides what the Ctrl-C means."""
    try:
        proc = subprocess.Popen(command(where, remote), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except FileNotFoundError:
        raise StallscopeError("no ssh client here: install OpenSSH (openssh-client)") from None
    deadline = time.monotonic() + timeout
    interrupted = False
    data: bytes | None = stdin
    while True:
        try:
            out, err = proc.communicate(data, timeout=max(0.0, deadline - time.monotonic()))
            break
        except KeyboardInterrupt:
            interrupted, data = True, None  # communicate goes on with the rest of stdin
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise StallscopeError(f"ssh {where.host}: no answer within {timeout:.0f} s") \
                from None
    if proc.returncode != 0:
        raise StallscopeError(explain(str(where.host), err.decode("utf-8", errors="replace"),
                                      proc.returncode))
    return out.decode("utf-8", errors="replace"), interrupted
