"""Options several subcommands share, declared once."""

from __future__ import annotations

import argparse


def add_device_option(p: argparse.ArgumentParser) -> None:
    """`--device N`: only that GPU (a device id is an int, as in Report.devices)."""
    p.add_argument("--device", type=int, help="only this GPU device id")
