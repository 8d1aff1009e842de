"""The bytes of a trace file: refused by kind, read or gunzipped within the memory budget.

Every path that reaches a reader passes `check_kind` (a FIFO or a device is named, never opened
for reading), and its text is read into one preallocated buffer. gzip is inflated here, member by
member, with a running byte count held against the budget: the size in the gzip trailer is only a
first guess for the buffer, never a limit, so a file whose trailer lies stops at the budget.
"""

from __future__ import annotations

import os
import re
import stat
import zlib
from collections.abc import Callable
from pathlib import Path

from stallscope.core.errors import TraceError
from stallscope.core.files import Refused, kind_of, open_regular
from stallscope.core.jobs import CancelFlag, Job
from stallscope.core.units import mib, plural

# Memory needed per byte of JSON: the bytes themselves, one batch of decoded structs and the
# columns (measured by tests/bench/bench_load.py).
MEMORY_FACTOR = 1.6
_READ_CHUNK = 8 << 20      # bytes read (or inflated) per step
_GZ_IN_CHUNK = 1 << 20     # compressed bytes fed to zlib per step
# JSON writers do not write megabytes of blanks in a row: a file that does is refused where the
# run is, before the rest of it is read or inflated.
_MAX_BLANK_RUN = 16 << 20
_NON_SPACE = re.compile(rb"[^ \t\r\n]")
# Every trace event has a "ph" (its phase); a file without one in its first 128 MiB is not a
# trace (a JSON head, then gigabytes of one string) and is refused there.
_EVENT_KEY = b'"ph"'
_MAX_BEFORE_EVENT = 128 << 20
UTF8_BOM = b"\xef\xbb\xbf"
_GZIP_MAGIC = b"\x1f\x8b"

Sniff = Callable[[bytes], None]  # raises TraceError when the head is no format it reads


class Text(bytearray):
    """A file's text, with notes on what was left out of it (trailing data after gzip)."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.notes: list[str] = []


def _shown(data: bytes) -> str:
    head = data[:16]
    if all(32 <= b < 127 or b in b"\t\r\n" for b in head):
        return '"' + " ".join(head.decode("ascii").split()) + ('..."' if len(data) > 16 else '"')
    return "bytes " + " ".join(f"{b:02x}" for b in head[:8])


def first_non_blank(data, start: int = 0, end: int | None = None) -> int | None:
    """Offset of the first byte in data[start:end] that is not JSON blank space, else None."""
    m = _NON_SPACE.search(data, start, len(data) if end is None else end)
    return m.start() if m else None


def check_kind(p: Path) -> os.stat_result:
    """stat() the path (following links); refuse anything but a regular file by its kind."""
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise _refused(p, Refused("", missing=True)) from None
    except OSError as exc:
        raise _refused(p, Refused(f"cannot read: {exc.strerror or exc}")) from None
    if not stat.S_ISREG(st.st_mode):
        raise _refused(p, Refused("", kind=kind_of(st.st_mode)))
    return st


def _refused(p: Path, why: Refused) -> TraceError:
    """core/files' refusal in a trace's words."""
    if why.missing:
        return TraceError(f"{p}: no such file or folder")
    if why.kind:
        return TraceError(f"{p}: is {why.kind}, not a trace file")
    return TraceError(f"{p}: {why}")


def available_memory() -> int:
    """The memory budget: STALLSCOPE_MEMORY_LIMIT (bytes) if set, else MemAvailable."""
    override = os.environ.get("STALLSCOPE_MEMORY_LIMIT")
    if override:
        try:
            return max(int(float(override)), 1)
        except ValueError:
            raise TraceError(f"STALLSCOPE_MEMORY_LIMIT={override!s}: not a number of bytes") \
                from None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62


def _too_large(p: Path, what: str, avail: int) -> TraceError:
    return TraceError(f"{p}: too large for the memory available: {what}; the budget of "
                      f"{mib(avail)} (STALLSCOPE_MEMORY_LIMIT, else the free memory) holds "
                      f"{mib(avail / MEMORY_FACTOR)} of JSON")


def read_bytes(p: Path, cancel: CancelFlag, sniff: Sniff) -> Job[bytearray]:
    """The file's text (gunzipped), at most budget / MEMORY_FACTOR bytes. Yields (0..400, 1000).

    `sniff` sees the first bytes after leading blanks as soon as they are read; it raises when
    they are no format stallscope reads, so a large file of something else is not read whole.
    """
    data = yield from _read_text(p, cancel, sniff)
    if data[:3] == UTF8_BOM:  # a UTF-8 byte order mark (Windows editors): not part of the JSON
        del data[:3]  # O(1): a bytearray drops its head by moving its start
    return data


def _read_text(p: Path, cancel: CancelFlag, sniff: Sniff) -> Job[bytearray]:
    avail = available_memory()
    limit = int(avail / MEMORY_FACTOR)
    try:
        f, st = open_regular(p)
    except Refused as why:
        raise _refused(p, why) from None
    with f:
        if st.st_size == 0:
            raise TraceError(f"{p}: file is empty")
        try:
            gz = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            watch = _Watch(p, sniff)
            if gz:
                data = yield from _gunzip(p, f, st.st_size, limit, avail, cancel, watch)
            else:
                data = yield from _read_plain(p, f, st.st_size, limit, avail, cancel, watch)
        except OSError as exc:
            raise TraceError(f"{p}: cannot read: {exc.strerror or exc}") from None
    return data


def _read_plain(p: Path, f, size: int, limit: int, avail: int, cancel: CancelFlag,
                watch: _Watch) -> Job[bytearray]:
    """Straight into a buffer of the file's size (what stat() said; a file that grows while it
    is read is read up to that size). The first chunk is judged before the size is."""
    head = f.read(min(_READ_CHUNK, size))
    watch.see(head, 0, len(head))
    if size > limit:
        raise _too_large(p, f"{mib(size)} of JSON", avail)
    buf = Text(size)
    buf[:len(head)] = head
    done = len(head)
    del head
    view = memoryview(buf)
    try:
        while done < size:
            n = f.readinto(view[done:done + _READ_CHUNK])
            if not n:
                break
            watch.see(buf, done, done + n)
            done += n
            cancel.check()
            yield 400 * done // size, 1000
    finally:
        view.release()
    del buf[done:]
    watch.finish(buf)
    return buf


def _gunzip(p: Path, f, size: int, limit: int, avail: int, cancel: CancelFlag,
            watch: _Watch) -> Job[bytearray]:
    """Inflate member after member into one buffer, counting against the limit as it grows."""
    f.seek(max(size - 4, 0))
    trailer = int.from_bytes(f.read(4), "little")  # the last member's size mod 2**32
    f.seek(0)
    buf = Text()  # grows by appending: realloc moves its pages, it does not copy them
    inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
    pending = b""
    read = 0
    try:
        while True:
            if not pending:
                pending = f.read(_GZ_IN_CHUNK)
                read += len(pending)
                if not pending:
                    break
            if inflate.eof:  # the next member, padding, or something else appended
                if not pending.strip(b"\0"):
                    pending = b""
                    continue
                if not pending.startswith(_GZIP_MAGIC):
                    junk = size - (read - len(pending))
                    buf.notes.append(f"{plural(junk, 'byte')} after the gzip data ignored "
                                     f"(not gzip: starts with {_shown(pending)})")
                    break
                inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
            chunk = inflate.decompress(pending, _READ_CHUNK)
            pending = inflate.unconsumed_tail or inflate.unused_data
            start = len(buf)
            if start + len(chunk) > limit:
                raise _too_large(p, f"over {mib(limit)} of JSON once unzipped (its gzip trailer "
                                    f"says {mib(trailer)})", avail)
            buf += chunk
            sniffed = watch.sniffed
            watch.see(buf, start, len(buf))
            if watch.sniffed and not sniffed and trailer > limit:
                # JSON, and at least this long (the trailer is the size mod 2**32)
                raise _too_large(p, f"{mib(trailer)} of JSON by its gzip trailer", avail)
            cancel.check()
            yield min(400 * read // size, 400), 1000
    except zlib.error as exc:
        raise TraceError(f"{p}: not a valid gzip file ({exc})") from None
    if not inflate.eof:
        raise TraceError(f"{p}: gzip stream is truncated (file cut short?)")
    watch.finish(buf)
    return buf


class _Watch:
    """Judges the text as it arrives: its first bytes go to the readers' sniff (a file of
    something else is refused after its first chunk), and a run of blanks longer than any trace
    has is refused where it is (gigabytes of spaces in a small gzip)."""

    def __init__(self, p: Path, sniff: Sniff) -> None:
        self.p, self.sniff = p, sniff
        self.first: int | None = None  # offset of the first non-blank byte
        self.sniffed = False
        self.blank = 0  # blank bytes in a row at the end so far (whole chunks only)
        self.event = False  # an event key seen

    def see(self, buf, start: int, end: int) -> None:
        """buf[start:end] just arrived."""
        if start == 0 and buf[:3] == UTF8_BOM:  # read_bytes strips it
            start = 3
        first = first_non_blank(buf, start, end)
        if first is None:
            self.blank += end - start
            if self.blank > _MAX_BLANK_RUN:
                where = "and no JSON" if self.first is None else f"in a row at byte {start:,}"
                raise TraceError(f"{self.p}: not a trace: more than {mib(_MAX_BLANK_RUN)} of "
                                 f"blank space {where}")
            return
        self.blank = 0
        if self.first is None:
            self.first = first
        if not self.sniffed and end - self.first >= 64:
            self._sniff(buf, self.first)
        if self.sniffed:
            self._no_nul(buf, max(start, self.first), end)
            self._some_event(buf, start, end)

    def _some_event(self, buf, start: int, end: int) -> None:
        if not self.event:
            self.event = buf.find(_EVENT_KEY, max(start - len(_EVENT_KEY), 0), end) >= 0
        if not self.event and end > _MAX_BEFORE_EVENT:
            raise TraceError(f"{self.p}: not a trace: no event (no \"ph\" key) in its first "
                             f"{mib(_MAX_BEFORE_EVENT)}")

    def _no_nul(self, buf, start: int, end: int) -> None:
        """JSON text never holds a zero byte: a file that does (a JSON head, then gigabytes of
        NULs: a sparse or preallocated file) is refused where the first one is."""
        at = buf.find(b"\0", start, end)
        if at >= 0:
            raise TraceError(f"{self.p}: not a trace: a zero byte at byte {at:,} (JSON text "
                             "holds none: a file cut short by a crash, or not text)")

    def _sniff(self, buf, first: int) -> None:
        self.sniffed = True
        self.sniff(bytes(buf[first:first + 64]))

    def finish(self, buf) -> None:
        if self.first is None:
            raise TraceError(f"{self.p}: file is empty")
        if not self.sniffed:
            self._sniff(buf, self.first)
            self._no_nul(buf, self.first, len(buf))
