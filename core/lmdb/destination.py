"""What a conversion destination holds, and whether the wizard (or a script) may write there.

    state = destination_state(dst)     # 'missing', 'empty', 'foreign', 'ours' (+ meta, progress)
    check_destination(dst, spec, pre)     # Verdict: ok?, a sentence, a tone (ok / bad / info)
    check_space(dst, estimated_bytes)     # Verdict on the free space where dst would be

What the converter itself checks there, each refusal one StallscopeError line: check_resume
(the stored conversion is this one), require_writable, then require_space, lock_destination
(one writer), and os_errors (a full or read-only disk said as such).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import lmdb

from stallscope.core import units
from stallscope.core.errors import StallscopeError
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.handles import check_length
from stallscope.core.lmdb.images import Preprocess

LOCK_NAME = "stallscope.lock"
MiB = 1 << 20


@dataclass
class DestState:
    """What a destination path holds: 'missing', 'empty', 'foreign' or 'ours' (only 'ours'
    has meta and progress)."""

    kind: str
    meta: dict = field(default_factory=dict)
    progress: dict = field(default_factory=dict)
    report: dict | None = None
    reason: str = ""

    @property
    def complete(self) -> bool:
        return bool(self.meta and self.meta.get("complete"))


def destination_state(dst: str | os.PathLike) -> DestState:
    dst = Path(dst).expanduser()
    if not dst.exists():
        return DestState("missing")
    if not dst.is_dir():
        return DestState("foreign", reason="is a file, not a folder")
    if not (dst / "data.mdb").exists():
        others = [p.name for p in dst.iterdir() if p.name not in (LOCK_NAME, "lock.mdb")]
        if others:
            return DestState("foreign", reason="is a folder that is not empty and holds no LMDB")
        return DestState("empty")
    check_length(dst)  # a copy cut short: opening it would crash (SIGBUS) on a missing page
    try:
        env = lmdb.open(str(dst), readonly=True, lock=False, subdir=True, max_dbs=0)
    except lmdb.Error as exc:
        if "already open" in str(exc):  # LMDB allows one handle per process
            raise StallscopeError(f"{dst}: is open in this process; close it first") from exc
        return DestState("foreign", reason=f"holds a data.mdb that LMDB cannot open ({exc})")
    try:
        with env.begin() as txn:
            raw_meta, progress, report = (txn.get(k) for k in (fmt.META_KEY, fmt.PROGRESS_KEY,
                                                                fmt.REPORT_KEY))  # fmt: skip
            entries = txn.stat()["entries"]
    finally:
        env.close()
    if raw_meta is None:
        if entries == 0:  # killed before its first commit: nothing to lose
            return DestState("empty")
        return DestState("foreign", reason="holds an LMDB that stallscope did not write")
    try:
        meta = fmt.loads(raw_meta)
    except ValueError:
        return DestState("foreign", reason="holds an LMDB whose metadata is not stallscope's")
    if not isinstance(meta, dict) or meta.get("format") != fmt.FORMAT:
        return DestState("foreign", reason="holds an LMDB that stallscope did not write")
    return DestState(
        "ours",
        meta,
        fmt.loads(progress) if progress else {"next_source": 0, "written": 0},
        fmt.loads(report) if report else None,
    )


@dataclass(frozen=True)
class Verdict:
    """ok: the conversion may go ahead; tone: how to show the text ('ok', 'bad', 'info')."""

    ok: bool
    text: str
    tone: str


def check_destination(dst: str | os.PathLike, spec: str | None, pre: Preprocess) -> Verdict:
    """May a conversion of `spec` with `pre` write to dst? New, empty, or an unfinished or
    finished conversion of the same source with the same options (it resumes or verifies)."""
    try:
        state = destination_state(dst)
    except StallscopeError as exc:
        return Verdict(False, str(exc), "bad")
    if state.kind == "foreign":
        return Verdict(False, f"This destination {state.reason}; choose another.", "bad")
    if state.kind in ("missing", "empty"):
        return Verdict(True, "A new LMDB will be created here.", "info")
    meta = state.meta
    if spec is None or meta["source"]["spec"] != spec:
        return Verdict(False, f"Holds a conversion of {meta['source']['spec']}; "
                       "choose another destination.", "bad")  # fmt: skip
    stored = Preprocess.from_dict(meta["preprocess"])
    if stored != pre:
        return Verdict(False, "Holds a conversion of this source with other options "
                       f"({stored.describe()}); set those to resume it.", "bad")  # fmt: skip
    if state.complete:
        return Verdict(True, f"Already converted ({meta['count']:,} samples): "
                       "Convert only verifies it.", "ok")  # fmt: skip
    done, total = state.progress.get("next_source", 0), meta["source"]["count"]
    return Verdict(True, f"Holds an unfinished conversion of this source ({done:,} of "
                   f"{total:,}): it will resume.", "ok")  # fmt: skip


def check_space(dst: str | os.PathLike, estimated_bytes: int | None) -> Verdict:
    """Is there room for about `estimated_bytes` on the disk dst would be on (its nearest
    existing parent)? Without an estimate, just say how much is free."""
    probe = _nearest_existing(Path(dst).expanduser())
    try:
        free = shutil.disk_usage(probe).free
    except OSError as exc:
        return Verdict(False, f"cannot read free space: {exc}", "bad")
    if estimated_bytes is None:
        return Verdict(True, f"{units.size(free)} free on {probe}", "info")
    if estimated_bytes > 0.95 * free:
        return Verdict(False, f"Only {units.size(free)} free on {probe}, the LMDB needs about "
                       f"{units.size(estimated_bytes)}: choose another disk or resize.", "bad")
    return Verdict(True, f"{units.size(free)} free on {probe}: enough.", "ok")


def check_resume(dst: Path, state: DestState, meta: dict) -> None:
    """Refuses (StallscopeError) when dst holds a conversion that is not the one `meta`
    describes: another source, other options or structure, a changed source, or an unfinished
    one in an older format."""
    if state.kind != "ours":
        return
    old = state.meta
    spec = meta["source"]["spec"]
    if old["source"]["spec"] != spec:
        raise StallscopeError(
            f"{dst}: holds a conversion of {old['source']['spec']}, not of {spec}; "
            "choose another destination or delete it"
        )
    if old.get("version") != fmt.VERSION:
        if old.get("complete"):
            return  # a finished conversion in an older format: readable as it is
        raise StallscopeError(f"{dst}: an unfinished conversion in stallscope format "
                              f"{old.get('version')}; convert into a new destination")  # fmt: skip
    if old["preprocess"] != meta["preprocess"] or old["structure"] != meta["structure"]:
        raise StallscopeError(
            f"{dst}: holds a conversion of {spec} with other options "
            f"({Preprocess.from_dict(old['preprocess']).describe()}); "
            "use the same options to resume, or another destination"
        )
    if old["source"]["fingerprint"] != meta["source"]["fingerprint"]:
        raise StallscopeError(
            f"{dst}: {spec} changed since this conversion started (files added, removed or "
            "resized); resuming would misnumber samples, so convert into a new destination"
        )


@contextlib.contextmanager
def os_errors(dst: Path, needed: int) -> Iterator[None]:
    """An OSError or LMDB error as one line naming dst (a full disk says how much it needs)."""
    try:
        yield
    except (OSError, lmdb.Error) as exc:
        if isinstance(exc, lmdb.MapFullError):
            raise
        raise StallscopeError(os_message(dst, needed, exc)) from exc


def os_message(dst: Path, needed: int, exc: BaseException) -> str:
    """A full disk said as such (with what is needed), then a read-only or forbidden one; a
    failure on a nearly full disk is taken for a full one only when it says nothing else."""
    free = _free_bytes(dst)
    text = " ".join(str(exc).split())
    if "No space" in text or "ENOSPC" in text:
        return _disk_full(dst, needed, free or 0)
    if isinstance(exc, PermissionError) or "Permission denied" in text or "Read-only" in text:
        return f"{dst}: cannot write there ({text})"
    if free is not None and free < 4 * MiB:
        return _disk_full(dst, needed, free)
    return f"{dst}: writing failed ({text})"


def require_writable(dst: Path) -> None:
    """Refuses (one line) a destination this process cannot write: a read-only disk, a folder
    it may not write in, a file system that takes no folders (/proc). Tried for real (a
    folder made and removed where dst is or would be), before the free space is looked at:
    a read-only disk is not a full one."""
    where = dst if dst.is_dir() else _nearest_existing(dst.parent)
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".stallscope-probe-", dir=where))
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise StallscopeError(_disk_full(dst, 0, _free_bytes(dst) or 0)) from exc
        why = f"[Errno {exc.errno}] {exc.strerror}" if exc.errno else str(exc)
        raise StallscopeError(f"{dst}: cannot write there ({why})") from exc


def _free_bytes(dst: Path) -> int | None:
    try:
        return shutil.disk_usage(_nearest_existing(dst)).free
    except OSError:
        return None


def _nearest_existing(path: Path) -> Path:
    """path, or its nearest parent that exists (where a new destination's disk is)."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def require_space(dst: Path, needed: int) -> None:
    free = _free_bytes(dst)
    if free is not None and needed > free:
        raise StallscopeError(_disk_full(dst, needed, free))


def _disk_full(dst: Path, needed: int, free: int) -> str:
    if not needed:
        return f"{dst}: disk full, {_mib(free)} MiB free"
    return f"{dst}: disk full, {_mib(needed)} MiB needed, {_mib(free)} MiB free"


def _mib(n: int) -> str:
    return f"{n / MiB:,.1f}" if n < 100 * MiB else f"{n / MiB:,.0f}"


def lock_destination(dst: Path) -> TextIO:
    """An exclusive lock on dst, held (open) for the whole conversion."""
    handle = open(dst / LOCK_NAME, "a+")  # noqa: SIM115 - held for the whole conversion
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.close()
        raise StallscopeError(f"{dst}: another conversion is writing there right now") from exc
    return handle
