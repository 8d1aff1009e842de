"""One set of number formatters: the CLI, the exports and the app print the same µs alike.

One voice: counts with thousands separators ("22,268 gaps"), words in the singular for one
("1 step"), durations in the unit their size calls for (µs, ms, s), repeats as "3 times" (never
"3x", which reads as a factor or hex: "0x"), ratios as "2.5x faster" or "2.5x slower".
"""

from __future__ import annotations


def duration(us: float) -> str:
    """Microseconds for people: "48.0 µs", "355.62 ms", "2.50 s"."""
    a = abs(us)
    if a < 1000:
        return f"{us:,.1f} µs"
    if a < 1e6:
        return f"{us / 1e3:,.2f} ms"
    return f"{us / 1e6:,.2f} s"


def ms(us: float) -> str:
    """Always in milliseconds, for columns that line up: "355.62 ms"."""
    return f"{us / 1e3:,.2f} ms"


def pct(frac: float, digits: int = 1) -> str:
    return f"{100 * frac:.{digits}f}%"


def mib(nbytes: float | None) -> str:
    return "-" if nbytes is None else f"{nbytes / 2**20:,.1f} MiB"


def count(n: int) -> str:
    """A count for people: "7", "22,268"."""
    return f"{n:,}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """ "1 step", "0 steps", "22,268 gaps"."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def times(n: int) -> str:
    """How often something happened: "0 times", "1 time", "1,204 times"."""
    return plural(n, "time")


def speedup(ratio: float) -> str:
    """A ratio of speeds (new / old) for people: "2.5x faster", "2.5x slower" (a ratio of 0.4
    is a slowdown, never "0.4x faster"), "as fast" within half a percent."""
    if not ratio > 0:
        return "no speed measured"
    if abs(ratio - 1.0) < 0.005:
        return "as fast"
    return f"{ratio:,.1f}x faster" if ratio > 1 else f"{1 / ratio:,.1f}x slower"


def size(nbytes: float) -> str:
    """Bytes for people, binary units: "812 B", "12.3 KiB", "48.0 MiB", "1.25 GiB"."""
    a = abs(nbytes)
    if a < 2**10:
        return f"{nbytes:,.0f} B"
    if a < 2**20:
        return f"{nbytes / 2**10:,.1f} KiB"
    if a < 2**30:
        return mib(nbytes)
    return f"{nbytes / 2**30:,.2f} GiB"


def clock(seconds: float) -> str:
    """A wait for people (ETAs): "4.2 s" under 10 s, else "0:42", "12:05", "1:02:09"."""
    if seconds < 10:
        return f"{max(seconds, 0.0):.1f} s"
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
