"""kernprof's table of one profile (Line #, Hits, Time, Per Hit, % Time, Line Contents), as the
`lineprof` command prints it."""

from __future__ import annotations

import io

from stallscope.core.lineprof.source import SourceMatch
from stallscope.core.lineprof.stats import Profile
from stallscope.core.units import plural


def format_table(profile: Profile, match: SourceMatch | None = None) -> str:
    """The table kernprof prints (Line #, Hits, Time, Per Hit, % Time, Line Contents); times in
    microseconds, plus per-sample time and any warnings."""
    out = io.StringIO()
    total = profile.total_s
    out.write(f"Total time: {total:g} s\n")
    out.write(f"File: {profile.file}\n")
    out.write(f"Function: {profile.qualname} at line {profile.first_line}\n")
    per = f"{total / profile.samples * 1e3:.3f} ms/sample" if profile.samples else "n/a"
    out.write(f"Samples: {profile.samples} ({per})"
              + (f", merged over {plural(profile.workers, 'worker process', 'worker processes')}"
                 if profile.workers else "")
              + "\n")
    for w in [*profile.warnings, *([match.warning] if match and match.warning else [])]:
        out.write(f"Warning: {w}\n")
    if profile.unprofiled_note():
        out.write(f"Note: {profile.unprofiled_note()}\n")
    rows = []
    for ln, share in zip(profile.lines, profile.shares(), strict=True):
        if ln.hits:
            rows.append((str(ln.lineno), str(ln.hits), _num(ln.total_s * 1e6),
                         _num(ln.per_hit_s * 1e6), f"{100 * share:5.1f}", ln.source))
        else:
            rows.append((str(ln.lineno), "", "", "", "", ln.source))
    header = ("Line #", "Hits", "Time", "Per Hit", "% Time", "Line Contents")
    widths = [max([6, len(header[0])] + [len(r[0]) for r in rows]),
              max([9] + [len(r[1]) for r in rows]),
              max([12] + [len(r[2]) for r in rows]),
              max([8] + [len(r[3]) for r in rows]),
              8]
    fmt = " ".join(f"%{w}s" for w in widths) + "  %-s"
    head = fmt % header
    out.write("Timer unit: 1e-06 s (Time, Per Hit in microseconds)\n\n")
    out.write(head + "\n" + "=" * len(head) + "\n")
    for r in rows:
        out.write((fmt % r).rstrip() + "\n")
    return out.getvalue()


def _num(x: float) -> str:
    s = f"{x:.1f}"
    return s if len(s) <= 12 else f"{x:.4g}"
