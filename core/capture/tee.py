"""The script's output, teed into stdout.log while it still reaches the terminal (or the app).

Several processes write to one terminal (DataLoader workers, the ranks a script launches), so
nothing here splits a line: the script's streams are line-buffered (each print is one write,
even under PYTHONUNBUFFERED=1) and the tee passes on whole lines only, in writes of at most
PIPE_BUF bytes, which a pipe keeps whole. A line end is "\\n" or "\\r" (progress bars); a
partial line is passed on after PARTIAL_S without more output.

When the output goes to a terminal (the runner's own descriptor is a tty, or the front end says
with --terminal that its stdout/stderr is one: `stallscope-cli run` reads the runner through
pipes) the script writes to a pseudo-terminal of that size instead of a pipe, so isatty() is True
and progress bars and coloured logs behave as in a plain run. Its output processing is off, so
the bytes copied on (and into stdout.log) are the script's own.

torch's profiler prints notes of its own on every window (USDT profiler_start/stop, the
CPUAllocator's "allocated before the profiling started"): they are kept in stdout.log and not
passed on, so the terminal shows what a plain run shows.
"""

from __future__ import annotations

import collections
import os
import re
import select
import struct
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

PIPE_BUF = 4096     # POSIX: writes up to this size to a pipe are never interleaved
PARTIAL_S = 0.2     # a line without its end yet waits this long for the rest
MAX_PENDING = 1 << 16
_ACTIVE: list[FdTee] = []  # the tee of this process, while it runs (for runner_stderr)
PROFILER_NOTES = re.compile(
    rb"^(?:USDT:[^\n]*SyncActivityProfilerHandler\.cpp:\d+\] profiler_(?:start|stop)"
    rb"|\[W[^\]\n]*CPUAllocator\.cpp:\d+\] Memory block of unknown size was allocated "
    rb"before the profiling started[^\n]*)\r?\n", re.M)


def without_profiler_notes(data: bytes) -> bytes:
    """The lines of `data` but torch profiler's own notes."""
    return PROFILER_NOTES.sub(b"", data) if b"profil" in data else data


def whole_lines(data: bytes) -> tuple[bytes, bytes]:
    """(the complete lines of data, the partial line after them)."""
    cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
    return data[:cut], data[cut:]


def chunks(data: bytes, size: int = PIPE_BUF) -> Iterator[bytes]:
    """data in pieces of at most `size` bytes that end at line ends (a longer line whole)."""
    while len(data) > size:
        cut = max(data.rfind(b"\n", 0, size), data.rfind(b"\r", 0, size)) + 1
        if cut == 0:
            cut = min((i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0),
                      default=len(data) - 1) + 1
        yield data[:cut]
        data = data[cut:]
    if data:
        yield data


STREAMS = {"stdout": 1, "stderr": 2}


def parse_terminal(spec: str) -> tuple[set[int], tuple[int, int] | None]:
    """--terminal "stdout,stderr:120x40": (the descriptors that are terminals, (cols, rows))."""
    names, _, size = spec.partition(":")
    fds = {STREAMS.get(n.strip(), 0) for n in names.split(",") if n.strip()}
    cols, x, rows = size.lower().partition("x")
    if 0 in fds or not fds or (size and not (x and cols.isdigit() and rows.isdigit())):
        raise ValueError(f"--terminal {spec}: expected STREAMS[:COLSxROWS], STREAMS from "
                         "stdout,stderr (e.g. stdout,stderr:120x40)")
    return fds, (int(cols), int(rows)) if size else None


def front_terminal() -> str:
    """This process's stdout/stderr as a --terminal spec for the runner ("" when neither is a
    terminal): what `stallscope-cli run` passes on."""
    names = [n for n, fd in STREAMS.items() if _isatty(fd)]
    if not names:
        return ""
    try:
        cols, rows = os.get_terminal_size(STREAMS[names[0]])
    except OSError:
        return ",".join(names)
    return f"{','.join(names)}:{cols}x{rows}"


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _window(fd: int) -> bytes | None:
    """The terminal size of fd as TIOCGWINSZ packs it, or None."""
    try:
        import fcntl
        import termios

        return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except (ImportError, OSError):
        return None


def open_terminal(size: tuple[int, int] | None, like: int) -> tuple[int, int] | None:
    """(read end, write end) of a pseudo-terminal that passes bytes unchanged, sized `size`
    (cols, rows) or as the terminal `like`; None where there are none (Windows)."""
    try:
        import fcntl
        import termios

        master, slave = os.openpty()
    except (ImportError, AttributeError, OSError):
        return None
    try:
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.OPOST  # no "\n" -> "\r\n": the log holds what the script wrote
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        window = struct.pack("HHHH", size[1], size[0], 0, 0) if size else _window(like)
        if window:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, window)
    except OSError:
        pass  # a terminal all the same, only not sized or still translating line ends
    return master, slave


def runner_stderr(text: str) -> None:
    """Print the runner's own text to stderr, even after the script closed sys.stderr or
    descriptor 2 (then through the tee, or nowhere when there is none). Through a tee it
    starts a line of its own (FdTee.expect_note)."""
    if _ACTIVE:
        _ACTIVE[0].expect_note(text.encode("utf-8", "replace"))
    try:
        print(text, end="", file=sys.stderr, flush=True)
        return
    except (OSError, ValueError, AttributeError):
        pass
    if _ACTIVE:
        _ACTIVE[0].write_stderr(text.encode("utf-8", "replace"))


class FdTee:
    """Tees file descriptors 1 and 2 into a log while passing them through.

    At the fd level, so C extensions and DataLoader worker processes are captured as well."""

    def __init__(self, log_path: Path, terminal: str = "") -> None:
        terminals, size = parse_terminal(terminal) if terminal else (set(), None)
        self._log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()
        self._saved: dict[int, int] = {}
        self._write_ends: dict[int, int] = {}
        self._threads: list[threading.Thread] = []
        self._notes: collections.deque[bytes] = collections.deque(maxlen=16)
        self._line_open = False  # the log's last byte is not a line end
        for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
            try:
                if stream is not None:
                    stream.flush()
                saved = os.dup(fd)
            except (OSError, ValueError):
                continue  # no such descriptor: nothing to tee
            ends = (open_terminal(size, saved) if fd in terminals or _isatty(saved)
                    else None)
            read_end, write_end = ends or os.pipe()
            os.dup2(write_end, fd)
            os.close(write_end)
            self._saved[fd] = saved
            self._write_ends[fd] = os.dup(fd)  # the pipe, kept for a script that closes fd
            thread = threading.Thread(target=self._pump, args=(read_end, saved),
                                      name=f"stallscope-tee-{fd}", daemon=True)
            thread.start()
            self._threads.append(thread)
        for stream in (sys.stdout, sys.stderr):
            try:  # write_through (PYTHONUNBUFFERED) would make print's parts separate writes
                stream.reconfigure(  # type: ignore[union-attr]  # not on TextIO: see except
                    line_buffering=True, write_through=False)
            except (AttributeError, ValueError):
                pass
        _ACTIVE[:] = [self]

    def write_stderr(self, data: bytes) -> None:
        """The runner's own words when the script closed sys.stderr or fd 2: into the pipe the
        tee reads (logged, passed on), else straight to the terminal's descriptor."""
        fd = self._write_ends.get(2)
        try:
            if fd is None:
                raise OSError
            os.write(fd, data)
        except OSError:
            self._pass(data, self._saved.get(2, 2))

    def expect_note(self, note: bytes) -> None:
        """The runner is about to write `note` on stderr: where it follows bytes that do not end a
        line (the script's progress line, from either stream), it is passed on after a line end,
        in the log and on the terminal. Matched when passed, so the order of the script's bytes
        and the note stays the order they reached the pipes."""
        if note.strip():
            self._notes.append(note)

    def _own_lines(self, data: bytes) -> bytes:
        """data with a line end before each expected runner note that would continue a line as
        the terminal shows it (torch's notes, not shown, are skipped: the line end goes before
        them)."""
        for note in list(self._notes):
            at = data.find(note)
            if at < 0:
                continue
            self._notes.remove(note)
            while at and (start := max(data.rfind(b"\n", 0, at - 1),
                                       data.rfind(b"\r", 0, at - 1)) + 1) < at \
                    and PROFILER_NOTES.fullmatch(data, start, at):
                at = start
            open_line = data[at - 1:at] not in (b"\n", b"\r") if at else self._line_open
            if open_line:
                data = data[:at] + b"\n" + data[at:]
        return data

    def _pump(self, read_end: int, out_fd: int) -> None:
        pending = b""
        while True:
            try:
                ready = [read_end] if os.name == "nt" else select.select(
                    [read_end], [], [], PARTIAL_S if pending else None)[0]  # no pipe select
                data = os.read(read_end, 65536) if ready else b""
            except OSError:
                break
            if ready and not data:
                break
            if not ready:  # a partial line waited long enough: pass it on as it is
                self._pass(pending, out_fd)
                pending = b""
                continue
            lines, pending = whole_lines(pending + data)
            if len(pending) > MAX_PENDING:
                lines, pending = lines + pending, b""
            self._pass(lines, out_fd)
        self._pass(pending, out_fd)
        os.close(read_end)

    def _pass(self, data: bytes, out_fd: int) -> None:
        if not data:
            return
        with self._lock:  # the line state: both streams as shown, in the order logged
            if self._notes:
                data = self._own_lines(data)
            self._log.write(data)
            shown = without_profiler_notes(data)
            if shown:
                self._line_open = not shown.endswith((b"\n", b"\r"))
        for piece in chunks(shown):
            try:
                view = memoryview(piece)
                while view:
                    view = view[os.write(out_fd, view):]
            except OSError:
                pass  # the reader went away; keep logging

    def close(self, timeout: float = 2.0) -> None:
        if _ACTIVE == [self]:
            _ACTIVE.clear()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)
        for fd in self._write_ends.values():
            os.close(fd)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            # Child processes that outlive the script still hold the pipe: do not wait for them.
            thread.join(max(0.0, deadline - time.monotonic()))
        for saved in self._saved.values():
            os.close(saved)
        with self._lock:
            self._log.close()
