"""The remote end of a run over SSH (core/launch/remote.py): deployed with the runner into
~/.cache/stallscope/runner-<version>-<hash>/ and run there by the host's python. Standard
library only, Python 3.8+ (the host's interpreter may be older than the app's).

    python3 remote_agent.py start --session S [--cwd DIR] [--env K=V]... -- PYTHON RUNNER-ARGS
        the runner in a session of its own, detached from the ssh session (a keeper process
        waits for it, closes the session if the runner could not, writes .runner.rc); prints
        {"session": ABS, "pid": PID} once the runner runs
    python3 remote_agent.py follow --session S [--offsets JSON]
        every byte appended to the session's files past the given offsets, as framed records
        on stdout: a JSON header line, then its bytes; {"done": rc} once the run ended and
        everything was sent
    python3 remote_agent.py interrupt --session S
        SIGINT to the runner: a Ctrl-C the local terminal gave stallscope, passed on (the
        script sees a KeyboardInterrupt, as in a run on this machine)
    python3 remote_agent.py stop --session S [--reason TEXT] [--grace SECONDS]
        the one stop rule: SIGTERM to the runner, after the grace SIGKILL to its process group
        and every descendant seen

Frames (follow): {"f": "events.jsonl", "o": OFFSET, "n": NBYTES} appends at OFFSET;
{"f": "run.json", "w": 1, "n": NBYTES} replaces the whole file. Within a round the events
files are read first and sent last, so a `trace_ready` never arrives before its trace.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PID_FILE, RC_FILE, STOP_FILE, OUT_FILE = ".runner.pid", ".runner.rc", ".stop", ".runner.out"
CHUNK = 1 << 20
IDLE_S = 0.1
START_WAIT_S = 30.0
STOP_GRACE_S = 5.0


def _capture():
    """The capture folder as the private package _stallscope_capture (as runner.py loads it)."""
    import importlib.util

    if "_stallscope_capture" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "_stallscope_capture", os.path.join(HERE, "__init__.py"),
            submodule_search_locations=[HERE])
        package = importlib.util.module_from_spec(spec)
        sys.modules["_stallscope_capture"] = package
        spec.loader.exec_module(package)
    import importlib

    return importlib.import_module("_stallscope_capture.closing")


def _path(text: str) -> str:
    return os.path.abspath(os.path.expanduser(text))


def _write_atomic(path: str, text: str) -> None:
    tmp = path + ".part"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


# ---------------------------------------------------------------- start / keep
def start(opts) -> int:
    session = _path(opts.session)
    if opts.cwd and not os.path.isdir(_path(opts.cwd)):
        print(f"stallscope agent: the script's folder {opts.cwd} is not a folder there "
              "(--remote-cwd)", file=sys.stderr)
        return 2
    os.makedirs(os.path.dirname(session), exist_ok=True)
    try:
        os.mkdir(session)  # a new folder: an earlier run's files would mix with this run's
    except FileExistsError:
        print(f"stallscope agent: {session} exists already (an earlier run's folder)",
              file=sys.stderr)
        return 2
    argv = [sys.executable, os.path.abspath(__file__), "keep", "--session", session]
    argv += ["--cwd", opts.cwd] if opts.cwd else []
    for item in opts.env:
        argv += ["--env", item]
    with open(os.path.join(session, ".keeper.out"), "ab") as log:
        keeper = subprocess.Popen(argv + ["--"] + opts.command, stdin=subprocess.DEVNULL,
                                  stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        pid = _read(os.path.join(session, PID_FILE))
        if pid:
            print(json.dumps({"session": session, "pid": int(pid)}), flush=True)
            return 0
        if keeper.poll() is not None:
            break
        time.sleep(0.05)
    text = _read(os.path.join(session, ".keeper.out")).splitlines()
    print("stallscope agent: the runner did not start" + (": " + text[-1] if text else ""),
          file=sys.stderr)
    return 2


def keep(opts) -> int:
    """Run the runner, wait for it, close its session, record its exit code."""
    session = _path(opts.session)
    env = dict(os.environ)
    for item in opts.env:
        key, _, value = item.partition("=")
        env[key] = value
    env["PYTHONUNBUFFERED"] = "1"
    cwd = _path(opts.cwd) if opts.cwd else os.path.expanduser("~")
    python, args = opts.command[0], opts.command[1:]
    runner = os.path.join(HERE, "runner.py")
    with open(os.path.join(session, OUT_FILE), "ab") as out:
        try:
            proc = subprocess.Popen([os.path.expanduser(python), runner] + args, cwd=cwd,
                                    env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=out, start_new_session=True)
        except OSError as exc:
            message = f"cannot start the interpreter {python}: {exc.strerror or exc}"
            out.write(("stallscope: " + message + "\n").encode())
            _write_atomic(os.path.join(session, PID_FILE), "0")
            _capture().close_run(session, None, message)
            _write_atomic(os.path.join(session, RC_FILE), "null")
            return 2
    _write_atomic(os.path.join(session, PID_FILE), str(proc.pid))
    rc = proc.wait()
    stopped = _read(os.path.join(session, STOP_FILE))
    if stopped:
        reason = stopped
    elif rc < 0:
        try:
            reason = "killed by " + signal.Signals(-rc).name
        except ValueError:
            reason = f"killed by signal {-rc}"
    else:
        reason = f"runner ended with code {rc} without a finished record"
    _capture().close_run(session, rc, reason)
    _write_atomic(os.path.join(session, RC_FILE), json.dumps(rc))
    return 0


# ---------------------------------------------------------------- follow
APPENDED = ("events", "stdout", OUT_FILE)  # files only ever appended to (or written once)


def _appended(rel: str) -> bool:
    name = os.path.basename(rel)
    return name.startswith(APPENDED) or name.endswith(".pt.trace.json.gz")


def _files(session: str) -> list:
    out = []
    for folder, dirs, names in os.walk(session):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.startswith(".") and name != OUT_FILE:
                continue  # temporaries (a trace being packed, a record being rewritten)
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                out.append(os.path.relpath(path, session))
    return sorted(out)


class Follower:
    def __init__(self, session: str, offsets: dict, out) -> None:
        self.session = session
        self.sent = {k: int(v) for k, v in offsets.items()}
        self.seen: dict = {}  # rel -> (inode, size, mtime) of a whole file as last sent
        self.out = out

    def frame(self, header: dict, data: bytes = b"") -> None:
        self.out.write(json.dumps(header).encode() + b"\n" + data)

    def round(self) -> bool:
        """One pass over the session's files; whether anything was sent."""
        files = _files(self.session)
        events = [f for f in files if os.path.basename(f).startswith("events")]
        sizes = {}
        for rel in events:  # the events' extent first: what they announce is complete
            try:
                sizes[rel] = os.path.getsize(os.path.join(self.session, rel))
            except OSError:
                pass
        sent = False
        for rel in files:
            if rel not in sizes:
                sent = self.send(rel, None) or sent
        for rel, size in sizes.items():
            sent = self.send(rel, size) or sent
        self.out.flush()
        return sent

    def send(self, rel: str, upto) -> bool:
        path = os.path.join(self.session, rel)
        try:
            st = os.stat(path)
        except OSError:
            return False
        if not _appended(rel):
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            if self.seen.get(rel) == key:
                return False
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                return False
            self.seen[rel] = key
            self.frame({"f": rel, "w": 1, "n": len(data)}, data)
            return True
        end = st.st_size if upto is None else min(upto, st.st_size)
        offset = self.sent.get(rel, 0)
        if end < offset:  # rewritten from scratch
            offset = 0
        if end == offset:
            return False
        with open(path, "rb") as f:
            f.seek(offset)
            while offset < end:
                data = f.read(min(CHUNK, end - offset))
                if not data:
                    break
                self.frame({"f": rel, "o": offset, "n": len(data)}, data)
                offset += len(data)
        self.sent[rel] = offset
        return True


def follow(opts) -> int:
    session = _path(opts.session)
    out = sys.stdout.buffer
    if not os.path.isdir(session):
        out.write(json.dumps({"error": "no session folder " + session}).encode() + b"\n")
        out.flush()
        return 2
    follower = Follower(session, json.loads(opts.offsets or "{}"), out)
    try:
        while True:
            ended = os.path.exists(os.path.join(session, RC_FILE))
            sent = follower.round()
            if ended:
                rc = json.loads(_read(os.path.join(session, RC_FILE)) or "null")
                follower.frame({"done": rc})
                out.flush()
                return 0
            if not sent:
                time.sleep(IDLE_S)
    except BrokenPipeError:  # the connection went: the run goes on
        return 0


# ---------------------------------------------------------------- stop
def _children_map() -> dict:
    kids: dict = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def descendants(pid: int) -> list:
    kids, out, todo = _children_map(), [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


def interrupt(opts) -> int:
    session = _path(opts.session)
    pid = int(_read(os.path.join(session, PID_FILE)) or 0)
    if pid > 0 and not os.path.exists(os.path.join(session, RC_FILE)):
        try:
            os.kill(pid, signal.SIGINT)
        except OSError:
            pass
    return 0


def stop(opts) -> int:
    session = _path(opts.session)
    pid = int(_read(os.path.join(session, PID_FILE)) or 0)
    if pid <= 0 or os.path.exists(os.path.join(session, RC_FILE)):
        return 0
    if not os.path.exists(os.path.join(session, STOP_FILE)):
        _write_atomic(os.path.join(session, STOP_FILE), opts.reason)
    seen = descendants(pid)
    if opts.grace > 0:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
        deadline = time.monotonic() + opts.grace
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    seen += descendants(pid) if _alive(pid) else []
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    for child in seen:
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="remote_agent.py")
    sub = parser.add_subparsers(dest="what")
    for name in ("start", "keep"):
        p = sub.add_parser(name)
        p.add_argument("--session", required=True)
        p.add_argument("--cwd")
        p.add_argument("--env", action="append", default=[])
        p.add_argument("command", nargs=argparse.REMAINDER)
    p = sub.add_parser("follow")
    p.add_argument("--session", required=True)
    p.add_argument("--offsets")
    sub.add_parser("interrupt").add_argument("--session", required=True)
    p = sub.add_parser("stop")
    p.add_argument("--session", required=True)
    p.add_argument("--reason", default="stopped by the user")
    p.add_argument("--grace", type=float, default=STOP_GRACE_S)
    opts = parser.parse_args(argv)
    if opts.what in ("start", "keep"):
        opts.command = opts.command[1:] if opts.command[:1] == ["--"] else opts.command
        if not opts.command:
            parser.error("no interpreter and runner arguments after --")
    actions = {"start": start, "keep": keep, "follow": follow, "interrupt": interrupt,
               "stop": stop}
    if opts.what not in actions:
        parser.error("start, follow, interrupt or stop")
    return actions[opts.what](opts)


if __name__ == "__main__":
    sys.exit(main())
