"""The typed events every reader produces and core/readers/columns.py packs into columns.

Chrome-trace phases are the vocabulary (`X` complete, `i`/`I` instant); a reader of another
format builds the same structs. Only what stallscope reads is declared: msgspec skips the rest.
"""

from __future__ import annotations

import msgspec


class Args(msgspec.Struct, gc=False):
    device: int | None = None
    stream: int | None = None
    correlation: int | None = None
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    nbytes: float | None = msgspec.field(default=None, name="Bytes")
    total_allocated: float | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: float | None = msgspec.field(default=None, name="Total Reserved")


class Fields(msgspec.Struct, gc=False):
    """What stallscope reads of a complete (`X`) event."""

    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float | None = None
    dur: float | None = None
    args: Args = msgspec.field(default_factory=Args)


class Event(Fields):
    """Any event with its phase, for the lenient per-event path."""

    ph: str = ""


class Complete(Fields, tag_field="ph", tag="X"):
    pass


class Instant(msgspec.Struct, gc=False, tag_field="ph", tag="i"):
    name: str = ""
    ts: float | None = None
    args: Args = msgspec.field(default_factory=Args)


class InstantGlobal(Instant, tag="I"):
    pass


def typed(ev: Event) -> Complete | Instant | None:
    """The struct an Event of the lenient path stands for (None: a phase stallscope skips)."""
    if ev.ph == "X":
        return Complete(ev.name, ev.cat, ev.pid, ev.tid, ev.ts, ev.dur, ev.args)
    if ev.ph in ("i", "I"):
        return Instant(ev.name, ev.ts, ev.args)
    return None
