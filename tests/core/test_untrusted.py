"""core/untrusted.py: the one function that shows an untrusted string as what it is, and the
checks every reader of a file from elsewhere uses (issue 29)."""

from __future__ import annotations

import pytest

from stallscope.core.commands.terminal import escape
from stallscope.core.errors import StallscopeError
from stallscope.core.untrusted import count, depth, finite, json_lines, loads, visible


@pytest.mark.parametrize("text, shown", [
    ("\u202egnp.exe", "\\u202egnp.exe"),            # right-to-left override
    ("/data/\u200bimagenet", "/data/\\u200bimagenet"),  # zero-width space
    ("a\x1b[2Jb", "a\\x1b[2Jb"),                    # ESC
    ("/usr/bin/python3\nrm -rf ~", "/usr/bin/python3\\nrm -rf ~"),
    ("tab\there\r", "tab\\there\\x0d"),
    ("\u2066isolate\u2069", "\\u2066isolate\\u2069"),
    ("bom\ufeff soft\u00adhyphen", "bom\\ufeff soft\\xadhyphen"),
    ("tag\U000e0041", "tag\\U000e0041"),             # a tag character: hidden text
    ("ok ⚠️ café 東京", "ok ⚠️ café 東京"),            # visible text passes, emoji included
])
def test_visible_shows_every_hidden_character(text, shown):
    assert visible(text) == shown


def test_the_terminal_escapes_with_the_same_function_keeping_its_lines():
    assert escape("a\u202eb\nc\td\x07") == "a\\u202eb\nc\td\\x07"
    assert escape("x\u200by") == visible("x\u200by")


def test_numbers_are_checked_or_left_out():
    assert count(3) == 3 and count(0) == 0
    assert count(-1) is count(True) is count("3") is count(2**63) is count(1.0) is None
    assert finite(1) == 1.0 and finite(2.5) == 2.5
    assert finite(float("nan")) is finite(float("inf")) is finite(10**400) is None
    assert finite(True) is finite("1") is None


def test_json_lines_leave_unholdable_numbers_out():
    data = (b'{"a": 1' + b"0" * 400 + b', "b": NaN, "c": Infinity, "d": 1e999, "e": 2}\n'
            b"not json\n" + b'{"f": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
    values, bad = json_lines(data)
    assert values == [{"a": None, "b": None, "c": None, "d": None, "e": 2}]
    assert bad == 2


def test_loads_limits_nesting():
    assert depth(loads(b"[[[]]]", "x")) == 3
    with pytest.raises(StallscopeError, match="^x.json is nested more than 64 levels deep$"):
        loads(b"[" * 65 + b"]" * 65, "x.json")
    with pytest.raises(StallscopeError, match="^x.json is nested too deep to be one$"):
        loads(b"[" * 1_000_000, "x.json")
    with pytest.raises(StallscopeError, match="^x.json is not JSON"):
        loads(b"{broken", "x.json")
    assert loads(b'{"s": "caf\xe9"}', "x") == {"s": "caf\ufffd"}  # undecodable: replaced



def test_loads_refuses_a_value_past_its_cap():
    mib = 1 << 20
    at_cap = b'"' + b"x" * (mib - 2) + b'"'
    assert loads(at_cap, "x", cap=mib) == "x" * (mib - 2)  # at the cap: read
    with pytest.raises(StallscopeError,
                       match=r"^x: 1\.5 MiB, larger than the 1\.0 MiB read of such a value$"):
        loads(b" " * (mib + mib // 2), "x", cap=mib)
