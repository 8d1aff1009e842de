"""This process's id, kept without a system call: the runner's hooks ask it several times a step
(a DataLoader worker forked from the script inherits them and must leave the session alone),
so a fork sets it anew in the child instead."""

from __future__ import annotations

import os

current = os.getpid()  # read as pid.current: this module's attribute, set again in a fork


def _forked() -> None:
    global current
    current = os.getpid()


if hasattr(os, "register_at_fork"):  # no fork on Windows: the id never changes there
    os.register_at_fork(after_in_child=_forked)
