"""Options several subcommands share, declared once."""

from __future__ import annotations


def add_device_option(p) -> None:
    """`--device N`: only that GPU (a device id is an int, as in Report.devices)."""
    p.add_argument("--device", type=int, help="only this GPU device id")
