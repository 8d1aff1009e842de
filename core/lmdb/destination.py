"""What a conversion destination holds, and whether the wizard (or a script) may write there.

    state = destination_state(dst)     # 'missing', 'empty', 'foreign', 'ours' (+ meta, progress)
    check_destination(dst, spec, pre)     # Verdict: ok?, a sentence, a tone (ok / bad / info)
    check_space(dst, estimated_bytes)     # Verdict on the free space where dst would be
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import lmdb

from stallscope.core import units
from stallscope.core.errors import StallscopeError
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.images import Preprocess

LOCK_NAME = "stallscope.lock"


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
    probe = Path(dst).expanduser()
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
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
