"""The script's output, teed into stdout.log while it still reaches the terminal (or the app)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path


class FdTee:
    """Tees file descriptors 1 and 2 into a log while passing them through.

    At the fd level, so C extensions and DataLoader worker processes are captured as well."""

    def __init__(self, log_path: Path) -> None:
        self._log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()
        self._saved: dict[int, int] = {}
        self._threads: list[threading.Thread] = []
        for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
            try:
                if stream is not None:
                    stream.flush()
                saved = os.dup(fd)
            except (OSError, ValueError):
                continue  # no such descriptor: nothing to tee
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)
            os.close(write_end)
            self._saved[fd] = saved
            thread = threading.Thread(target=self._pump, args=(read_end, saved),
                                      name=f"stallscope-tee-{fd}", daemon=True)
            thread.start()
            self._threads.append(thread)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.reconfigure(line_buffering=True)
            except (AttributeError, ValueError):
                pass

    def _pump(self, read_end: int, out_fd: int) -> None:
        while True:
            try:
                data = os.read(read_end, 65536)
            except OSError:
                break
            if not data:
                break
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(out_fd, view):]
            except OSError:
                pass  # the reader went away; keep logging
            with self._lock:
                self._log.write(data)
        os.close(read_end)

    def close(self, timeout: float = 2.0) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            # Child processes that outlive the script still hold the pipe: do not wait for them.
            thread.join(max(0.0, deadline - time.monotonic()))
        for saved in self._saved.values():
            os.close(saved)
        with self._lock:
            self._log.close()
