"""A run on another host over the user's own ssh: the runner deployed (core/launch/ssh.py) and
started detached there by remote_agent.py (core/capture), its session followed by one ssh
channel that streams every appended byte (remote_agent follow) into a local mirror of the same
layout; stop runs the agent's stop (the same grace rule on the remote process group).

A dropped connection ends the handle (Ending.lost), never the run: `attach` follows it again
from the mirror's sizes, so nothing arrives twice and nothing is lost. Remote bytes are
untrusted: file names are checked against the session layout before anything is written."""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import shlex
import subprocess
import threading
from pathlib import Path

from stallscope.core.capture import layout
from stallscope.core.capture import options as runner_options
from stallscope.core.capture.remote_agent import APPENDED, OUT_FILE
from stallscope.core.errors import StallscopeError
from stallscope.core.launch import ssh
from stallscope.core.launch.handle import Output, RunHandle
from stallscope.core.launch.job import INTERRUPTED, STOP_GRACE_S, Ending, Job, Where

# what a remote session may hold (anything else it sends is dropped): the runner's own names,
# traces and line profiles named from the script by layout.safe_stem (letters of any script)
NAME = re.compile(r"^(?:(?:traces|lineprof)/)?[\w.@+=,-][\w.@+=, -]{0,200}$")
MAX_HEADER = 4096
MAX_FRAME = 4 << 20  # the agent sends at most 1 MiB a frame; a whole run.json or record.bin


def lost_text(where: Where, remote_session: str, session: Path | None = None) -> str:
    return (f"the connection to {where.host} ended; the run goes on there: "
            f"{attach_command(where, remote_session, session)} follows it again")


def attach_command(where: Where, remote_session: str, session: Path | None = None) -> str:
    """The CLI line that follows the run again, with the options it was started with (an
    ssh config from STALLSCOPE_SSH_CONFIG applies again by itself) and, given `session`, the
    local mirror it was writing: without it attach would start a new copy from the first
    byte, and leave that mirror unfinished."""
    options = list(where.ssh_options)
    config = os.environ.get("STALLSCOPE_SSH_CONFIG")
    if config and options[:2] == ["-F", config]:
        options = options[2:]
    words = ["stallscope-cli", "attach", f"{where.host}:{remote_session}"]
    if session is not None:
        words += ["--session", str(session)]
    if where.python and where.python != "python3":
        words += ["--remote-python", where.python]
    if where.cache:
        words += ["--remote-cache", where.cache]
    words += [f"--ssh-option={o}" for o in options]
    return shlex.join(words)


def _feed(proc: subprocess.Popen, data: bytes) -> None:
    """Write `data` to the process's stdin and close it (ssh forwards it as it connects)."""
    try:
        assert proc.stdin is not None
        with proc.stdin:
            proc.stdin.write(data)
    except (OSError, ValueError):
        pass  # ssh ended first: its exit says why


class RemoteRun(RunHandle):
    def __init__(self, where: Where, session: Path, remote_session: str,
                 on_output: Output | None) -> None:
        super().__init__(session, on_output)
        self.where = where
        self.remote = remote_session
        self.remote_session = remote_session
        self.lost = ""
        self.cause = ""  # ssh's words on a dropped connection, when it said something
        self.failed = False  # the agent said what is wrong there: no run goes on
        self._frames: queue.Queue = queue.Queue()
        self._stopper: subprocess.Popen | None = None
        self._stream: subprocess.Popen | None = None

    # ------------------------------------------------------------------ start / attach
    @classmethod
    def start(cls, where: Where, job: Job, on_output: Output | None) -> RemoteRun:
        session = Path(job.session)
        # a folder of its own there: a name taken from the local one alone would be an earlier
        # run's (another tune's trial 01-as-written) and mix with it (the agent refuses one)
        remote = job.remote_session or \
            f"{ssh.cache(where)}/sessions/{session.name}-{secrets.token_hex(4)}"
        name, tar = ssh.bundle()
        deploy, agent = ssh.deploy_line(where, name)
        argv = runner_options.build_argv(remote, job.script, list(job.args), job.schedule,
                                         job.options)
        python = where.python or "python3"
        words = [agent, "start", "--session", ssh.word(remote)]
        if where.cwd:
            words += ["--cwd", ssh.word(where.cwd)]
        for key, value in job.env.items():
            words += ["--env", ssh.word(f"{key}={value}")]
        words += ["--", ssh.word(python), *map(ssh.word, argv)]
        line = f"{deploy} && exec {ssh.word(python)} {' '.join(words)}"
        out, interrupted = ssh.run_whole(where, line, stdin=tar)
        try:
            started = json.loads(out.strip().splitlines()[-1])
            remote_abs = str(started["session"])
        except (ValueError, IndexError, KeyError, TypeError):
            raise StallscopeError(f"on {where.host}: the runner did not start "
                                  f"(the agent said {out.strip()[-200:]!r})") from None
        session.mkdir(parents=True, exist_ok=True)
        run = cls(where, session, remote_abs, on_output)
        run._follow_remote()
        if interrupted:  # Ctrl-C while it started: a stop, as for a run under way
            run.stop(INTERRUPTED)
        return run

    @classmethod
    def attach(cls, where: Where, remote_session: str, session: Path,
               on_output: Output | None) -> RemoteRun:
        # the mirror's folder comes with its first file: a wrong folder there makes none here
        run = cls(where, session, remote_session, on_output)
        run._follow_remote(run._offsets(), deploy=True)  # this version's agent may not be there
        return run

    def _offsets(self) -> dict[str, int]:
        """What the mirror already holds of the files only ever appended to."""
        out = {}
        for path in self.session.rglob("*"):
            rel = path.relative_to(self.session).as_posix()
            if path.is_file() and (Path(rel).name.startswith(APPENDED)
                                   or rel.endswith(layout.TRACE_SUFFIX)):
                out[rel] = path.stat().st_size
        return out

    def _follow_remote(self, offsets: dict | None = None, deploy: bool = False) -> None:
        """The stream of the session's bytes; `deploy`: the runner (and agent) unpacked there
        first unless present (attach: the run may have been started by another version)."""
        python = self.where.python or "python3"
        name, tar = ssh.bundle()
        unpack, agent = ssh.deploy_line(self.where, name)
        line = (f"exec {ssh.word(python)} {agent} follow --session {ssh.word(self.remote)}"
                f" --offsets {ssh.word(json.dumps(offsets or {}))}")
        line = f"{unpack} && {line}" if deploy else line
        try:
            # ssh in a session of its own (here and for the stop): a terminal's Ctrl-C reaches
            # this process only, which stops the run; ssh would die of it, and the run with it
            self._stream = subprocess.Popen(ssh.command(self.where, line),
                                            stdin=subprocess.PIPE if deploy else subprocess.DEVNULL,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            start_new_session=True)
        except FileNotFoundError:
            raise StallscopeError("no ssh client here: install OpenSSH") from None
        if deploy:
            threading.Thread(target=_feed, args=(self._stream, tar), daemon=True,
                             name="stallscope-deploy").start()
        threading.Thread(target=self._read_frames, args=(self._stream,), daemon=True,
                         name="stallscope-remote").start()

    @property
    def transport_pid(self) -> int | None:
        """The local ssh process that streams the session (ending it drops the connection)."""
        return self._stream.pid if self._stream is not None else None

    # ------------------------------------------------------------------ the stream
    def _read_frames(self, proc: subprocess.Popen) -> None:
        pipe = proc.stdout
        assert pipe is not None
        try:
            while True:
                header = pipe.readline(MAX_HEADER)
                if not header:
                    break
                frame = json.loads(header)
                if not isinstance(frame, dict):
                    break
                n = int(frame.get("n") or 0)
                if n > MAX_FRAME:
                    break  # not what the agent sends: the stream is not to be trusted further
                data = pipe.read(n) if n > 0 else b""
                if len(data) < n:
                    break
                self._frames.put((frame, data))
                if "done" in frame or "error" in frame:
                    return
        except (ValueError, OSError):
            pass
        err = proc.stderr.read().decode("utf-8", errors="replace") if proc.stderr else ""
        rc = proc.wait()
        self._frames.put(({"gone": rc, "stderr": err}, b""))

    def _advance(self) -> None:
        if self._stopper is not None and self._stopper.poll() is not None:
            self._stopper = None
        while self._exit is None:
            try:
                frame, data = self._frames.get_nowait()
            except queue.Empty:
                return
            if "done" in frame:
                rc = frame["done"]
                self._exit = (rc if isinstance(rc, int) else None, "")
            elif "error" in frame:
                self.lost = f"on {self.where.host}: {frame['error']}"
                self.failed = True
                self._exit = (None, self.lost)
            elif "gone" in frame:
                self.lost = lost_text(self.where, self.remote)
                if frame["gone"] == 255 and frame.get("stderr"):
                    self.cause = ssh.explain(str(self.where.host), frame["stderr"], 255) + "; "
                    self.lost = self.cause + self.lost
                self._exit = (None, self.lost)
            else:
                try:
                    self._write(frame, data)
                except (OSError, ValueError, TypeError):
                    pass  # a frame the mirror cannot hold (a name that is a folder here)

    def _write(self, frame: dict, data: bytes) -> None:
        rel = str(frame.get("f", ""))
        if not NAME.match(rel) or any(part in (".", "..") for part in rel.split("/")):
            return  # not a name a session holds: dropped
        path = self.session / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if frame.get("w"):
            tmp = path.with_name(f".{path.name}.part")
            tmp.write_bytes(data)
            os.replace(tmp, path)
            if rel == layout.RUN_JSON:
                self._note_host()
            return
        offset = int(frame.get("o") or 0)
        with open(path, "r+b" if path.exists() else "wb") as f:
            if offset == 0:
                f.truncate()
            f.seek(offset)
            f.write(data)
        if rel == OUT_FILE:
            self._output(data, False)

    def _note_host(self) -> None:
        """run.json says where the run ran: the host and the remote session folder."""
        path = self.session / layout.RUN_JSON
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(info, dict):
            info["remote"] = {"host": self.where.host, "session": self.remote,
                              "python": self.where.python or "python3"}
            tmp = path.with_name(f".{path.name}.part")
            tmp.write_text(json.dumps(info, indent=2), encoding="utf-8")
            os.replace(tmp, path)

    # ------------------------------------------------------------------ stop / end
    def lost_line(self) -> str:
        """What to say when this side goes away and the run goes on there: the attach line
        with this mirror's folder, to paste as it is (the agent's error when it failed)."""
        if self.failed:
            return self.lost
        return self.cause + lost_text(self.where, self.remote, self.session)

    def interrupt(self) -> None:
        """SIGINT to the runner there (a Ctrl-C the terminal gave stallscope, passed on as a
        local run's is: the script sees a KeyboardInterrupt)."""
        if self.ending is None:
            self._agent("interrupt")

    def _stop(self, grace: float | None) -> None:
        grace = STOP_GRACE_S if grace is None else grace
        self._stopper = self._agent(f"stop --reason {ssh.word(self.stop_reason)} "
                                    f"--grace {grace:g}")

    def _agent(self, command: str) -> subprocess.Popen:
        """The agent's `command` on the session there, not waited for (poll() goes on)."""
        python = self.where.python or "python3"
        name, _ = ssh.bundle()
        _, agent = ssh.deploy_line(self.where, name)
        line = f"exec {ssh.word(python)} {agent} {command} --session {ssh.word(self.remote)}"
        return subprocess.Popen(ssh.command(self.where, line), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)

    def _finish(self, rc: int | None, reason: str) -> None:
        if not self.lost:  # the remote end closed the session; the mirror holds it all
            super()._finish(rc, reason)
            return
        self._follow(final=True)
        self.ending = Ending(rc, self.lost, {}, (), lost=True)
        if self._stream is not None and self._stream.poll() is None:
            self._stream.kill()
