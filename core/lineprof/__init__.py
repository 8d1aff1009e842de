"""Line stats of Dataset.__getitem__ (the line heatmap's data), read and explained headless.

    from stallscope.core import lineprof
    profiles = lineprof.load_any(path)          # session folder, lineprof/*.json or .lprof

Modules: stats (Line, Profile, the JSON file), kernprof (.lprof pickles), files (a session's
lineprof/ folder, load_any), source (the code now vs as profiled, after vs before),
heaviest (the costliest line, the advice's sentence), table (kernprof's text table),
install (is line_profiler there). The capture side lives in core/capture/lineprof_capture.py.
"""

from stallscope.core.lineprof.files import (
    LINEPROF_DIR,
    SessionStats,
    find_profiles,
    load_any,
    load_session,
    needs_trust,
    read_stats,
    session_of,
    session_stats,
)
from stallscope.core.lineprof.heaviest import (
    evidence,
    heaviest_line,
    heaviest_line_of,
    primary,
)
from stallscope.core.lineprof.install import install_command, line_profiler_missing
from stallscope.core.lineprof.kernprof import load_lprof, looks_like_pickle
from stallscope.core.lineprof.source import (
    SourceMatch,
    common_indent,
    match_lines,
    match_source,
    with_sources,
)
from stallscope.core.lineprof.stats import (
    FORMAT_VERSION,
    Line,
    LineprofError,
    Profile,
    from_json,
    load,
    save,
)
from stallscope.core.lineprof.table import format_table

__all__ = [
    "FORMAT_VERSION", "LINEPROF_DIR", "Line", "LineprofError", "Profile", "SessionStats",
    "SourceMatch", "common_indent", "evidence", "find_profiles", "format_table", "from_json",
    "heaviest_line", "heaviest_line_of", "install_command", "line_profiler_missing", "load",
    "load_any", "load_lprof", "load_session", "looks_like_pickle", "match_lines", "match_source",
    "needs_trust", "primary", "read_stats", "save", "session_of", "session_stats",
    "with_sources",
]
