"""The typed trace events every reader produces and core/readers/columns.py packs into columns
(a session's runner events are core/session/events.py's, another thing).

Chrome-trace phases are the vocabulary (`X` complete, `i`/`I` instant); a reader of another
format builds the same structs. Only what stallscope reads is declared: msgspec skips the rest.
"""

from __future__ import annotations

import msgspec


class XArgs(msgspec.Struct, gc=False):
    """The args of a complete event (fewer fields: a faster decode)."""

    device: int | None = None
    stream: int | str | None = None  # ROCm runtime events write "0x0"
    correlation: int | None = None


class MemArgs(msgspec.Struct, gc=False):
    """The args of a `[memory]` instant."""

    device_type: int | None = msgspec.field(default=None, name="Device Type")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    nbytes: float | None = msgspec.field(default=None, name="Bytes")
    total_allocated: float | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: float | None = msgspec.field(default=None, name="Total Reserved")


class Args(MemArgs):
    """Both, for the lenient per-event path that does not know the phase beforehand: a
    `[memory]` instant's args and XArgs' (msgspec allows one base with fields)."""

    device: int | None = None
    stream: int | str | None = None  # ROCm runtime events write "0x0"
    correlation: int | None = None


class Fields(msgspec.Struct, gc=False):
    """What stallscope reads of a complete (`X`) event, but its args."""

    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float | None = None
    dur: float | None = None


class AnyPhase(Fields):
    """Any event with its phase, for the lenient per-event path."""

    ph: str = ""
    args: Args = msgspec.field(default_factory=Args)


class NameArgs(msgspec.Struct, gc=False):
    """The args of a metadata (`M`) event: thread_name's and process_name's `name`."""

    name: str | int | float | None = None


class Metadata(msgspec.Struct, gc=False, tag_field="ph", tag="M"):
    """A metadata event; stallscope reads `thread_name` (what the profiler named a thread:
    `pt_autograd_0`, `python3`)."""

    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    args: NameArgs = msgspec.field(default_factory=NameArgs)


class Complete(Fields, tag_field="ph", tag="X"):
    args: XArgs = msgspec.field(default_factory=XArgs)


class Instant(msgspec.Struct, gc=False, tag_field="ph", tag="i"):
    name: str = ""
    ts: float | None = None
    args: MemArgs = msgspec.field(default_factory=MemArgs)


class InstantGlobal(Instant, tag="I"):
    pass


def by_phase(ev: AnyPhase) -> Complete | Instant | None:
    """The struct an event of the lenient path stands for (None: a phase stallscope skips)."""
    a = ev.args
    if ev.ph == "X":
        return Complete(ev.name, ev.cat, ev.pid, ev.tid, ev.ts, ev.dur,
                        XArgs(a.device, a.stream, a.correlation))
    if ev.ph in ("i", "I"):
        return Instant(ev.name, ev.ts, MemArgs(a.device_type, a.device_id, a.nbytes,
                                               a.total_allocated, a.total_reserved))
    return None
