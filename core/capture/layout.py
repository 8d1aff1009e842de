"""A session folder's layout, in one place: file names, rank files, event kinds, `finished`.

    run.json            what was launched (argv, cwd, interpreter, schedule, torch/CUDA versions,
                        DataLoader overrides, and at the end the DataLoaders the script built)
    events.jsonl        one JSON object a line, flushed per line: started, dataloader, step,
                        trace_ready, lineprof_ready, warning, error, finished
                        (ranks under torchrun: events.rank<N>.jsonl)
    stdout.log          the script's stdout and stderr, teed (ranks: stdout.rank<N>.log)
    record.bin          the whole run, every step, bounded (capture/record.py; ranks:
                        record.rank<N>.bin); epoch starts and saves are `epoch`/`save` events
    traces/<script>[_rank<N>].<timestamp>.pt.trace.json.gz
    lineprof/*.json     line_profiler stats of __getitem__
    tune.json           (a tune folder, holding one session folder per trial)

The runner writes it (capture/, standard library only: it runs in the user's interpreter) and
core/session reads it; both take the names from here. `append_finished` is the only code that
writes a `finished` record, whoever closes the run (the runner, the CLI, the app).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

RUN_JSON = "run.json"
EVENTS = "events.jsonl"
EVENT_GLOB = "events*.jsonl"
STDOUT_LOG = "stdout.log"
TRACES = "traces"
LINEPROF = "lineprof"
TRACE_SUFFIX = ".pt.trace.json.gz"
TUNE_JSON = "tune.json"
RECORD = "record.bin"
RECORD_GLOB = "record*.bin"

# event kinds
STARTED = "started"
DATALOADER = "dataloader"
STEP = "step"
TRACE_READY = "trace_ready"
LINEPROF_READY = "lineprof_ready"
WARNING = "warning"
ERROR = "error"
FINISHED = "finished"
EPOCH = "epoch"
SAVE = "save"
RUN_TAIL = "run_tail"
EVENT_KINDS = (STARTED, DATALOADER, STEP, TRACE_READY, LINEPROF_READY, WARNING, ERROR, FINISHED,
               EPOCH, SAVE, RUN_TAIL)


def rank_part(rank: int | None, sep: str = ".") -> str:
    return "" if rank is None else f"{sep}rank{rank}"


def events_name(rank: int | None) -> str:
    return f"events{rank_part(rank)}.jsonl"


def stdout_name(rank: int | None) -> str:
    return f"stdout{rank_part(rank)}.log"


def record_name(rank: int | None) -> str:
    return f"record{rank_part(rank)}.bin"


def trace_stem(script_stem: str, rank: int | None) -> str:
    return f"{safe_stem(script_stem)}{rank_part(rank, '_')}"


def safe_stem(text: str) -> str:
    """A file name's stem from a script's name: letters and digits of any script, `.`, `_`
    and `-` kept, anything else `_` (as lineprof_capture names its files): `train (1).py` or
    `it's.py` gives a trace every file system takes and a remote mirror accepts (a name
    from the host is checked before it is written here, core/launch/remote.py)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text) or "script"


def rank_of_file(name: str) -> int | None:
    """events.rank3.jsonl (or stdout.rank3.log) -> 3; events.jsonl -> None."""
    parts = name.split(".")
    if len(parts) == 3 and parts[1].startswith("rank") and parts[1][4:].isdigit():
        return int(parts[1][4:])
    return None


def earlier_run(folder: str | os.PathLike) -> str | None:
    """What of an earlier run (or tune) a folder holds, e.g. "events.jsonl"; None when it
    holds none. A run never writes into such a folder: its events, records and traces would
    mix with the earlier run's, and every figure read from it would be both runs'."""
    p = Path(folder)
    if not p.is_dir():
        return None
    for pattern in (RUN_JSON, EVENT_GLOB, RECORD_GLOB, TUNE_JSON, f"{TRACES}/*"):
        found = next(iter(sorted(p.glob(pattern))), None)
        if found is not None:
            return found.relative_to(p).as_posix()
    return None


def record(kind: str, rank: int | None = None, **fields: object) -> dict:
    out = {"event": kind, "t": round(time.time(), 6)}
    if rank is not None:
        out["rank"] = rank
    out.update(fields)
    return out


def encode(rec: dict) -> bytes:
    return (json.dumps(rec, default=str) + "\n").encode("utf-8")


def has_finished(events_path: str | os.PathLike) -> bool:
    """Whether an events file already holds a `finished` record (only those lines are parsed)."""
    p = Path(events_path)
    try:
        data = p.read_bytes()
    except OSError:
        return False
    for line in data.split(b"\n"):
        if b'"finished"' not in line:
            continue
        try:
            if json.loads(line).get("event") == FINISHED:
                return True
        except (ValueError, AttributeError):
            continue
    return False


def append_finished(events_path: str | os.PathLike, rc: int | None, reason: str,
                    rank: int | None = None, **fields: object) -> bool:
    """Append the run's `finished` record: the one writer of it.

    Returns False (and writes nothing) when the file already ends the run. A torn last line (a
    process killed mid-write) stays torn; the record starts on a line of its own."""
    p = Path(events_path)
    if has_finished(p):
        return False
    p.parent.mkdir(parents=True, exist_ok=True)
    line = encode(record(FINISHED, rank, rc=rc, reason=reason, **fields))
    with open(p, "ab") as f:
        if f.tell() and not _ends_with_newline(p):
            f.write(b"\n")
        f.write(line)
        f.flush()
    return True


def _ends_with_newline(p: Path) -> bool:
    with open(p, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"
