"""Every colour of the app, in one place, one meaning: causes, busy, streams, threads, verdicts,
message strips. Views and dialogs import from here; none writes a hex value of its own.

Adding an idle cause: its colour in CAUSE_COLORS (a test checks that every cause has one).
"""

from __future__ import annotations

from PySide6.QtGui import QColor

# Cause names and labels live in core/causes.py (causes.CAUSES, causes.label); colours here.

CAUSE_COLORS = {
    "gpu_wait": "#1098ad",
    "data_loading": "#e8590c",
    "sync": "#9c36b5",
    "optimizer": "#2f9e44",
    "cpu_ops": "#f0a202",
    "backward": "#d6336c",
    "python": "#5c7cfa",
    "uncovered": "#98a2ad",
}

# Shown apart in legends: not a state of the CPU (the GPU had work queued; nothing explains it).
# Every other cause reads "idle while the CPU was in ...".
NOT_CPU_STATES = ("gpu_wait", "uncovered")

BUSY_COLOR = "#1f5fa8"
COMM_COLOR = "#6741d9"  # communication (DESIGN: Communication(d)): collectives, on lanes + legend
STREAM_COLORS = {"compute": BUSY_COLOR, "communication": COMM_COLOR, "copy": "#a0522d"}
LAUNCH_THREAD_COLOR = CAUSE_COLORS["backward"]  # the autograd threads: "CPU backward"
OTHER_THREAD_COLOR = "#495057"                  # other threads' ops in a trace without a GPU
STEP_COLORS = ("#eef2f7", "#dfe6ef")
STEP_EDGE_COLOR = "#7a8794"
TEXT_ON_COLOR = "#ffffff"  # names drawn on a saturated bar
ALLOCATED_COLOR = "#1f5fa8"
RESERVED_COLOR = "#c92a2a"
BETTER_COLOR = "#2b8a3e"
WORSE_COLOR = "#c92a2a"
TEXT_COLOR = "#212529"
MUTED_TEXT = "#5c6670"


def qcolor(hex_color: str, alpha: int = 255) -> QColor:
    color = QColor(hex_color)
    color.setAlpha(alpha)
    return color


def tint(hex_color: str, amount: float) -> str:
    """Mix with the plot background (white in the light theme, near-black in the dark one), so
    idle shading sits back behind the busy bars under either theme."""
    color, bg = QColor(hex_color), QColor(plot_theme()["bg"])
    mix = [round(c + (b - c) * amount) for c, b in ((color.red(), bg.red()),
                                                     (color.green(), bg.green()),
                                                     (color.blue(), bg.blue()))]
    return "#{:02x}{:02x}{:02x}".format(*mix)


LIGHT_PLOT = {"bg": "#ffffff", "fg": "#3b424c", "text": TEXT_COLOR, "dim": MUTED_TEXT,
              "steps": STEP_COLORS, "track": "#f1f3f5", "track_border": "#ced4da",
              "legend_bg": (255, 255, 255, 220), "dark": False}
DARK_PLOT = {"bg": "#17191c", "fg": "#c9ced6", "text": "#e7e9ec", "dim": "#a3aab4",
             "steps": ("#23272d", "#2c323a"), "track": "#25282d", "track_border": "#4a4f58",
             "legend_bg": (23, 25, 28, 220), "dark": True}


def plot_theme() -> dict:
    """Colours for plots under the app's current theme (light when no theme is applied)."""
    try:
        from stallscope.gui import theme

        pal = theme.palette()
    except (ImportError, AttributeError, KeyError):
        return LIGHT_PLOT
    base = DARK_PLOT if pal.name == "dark" else LIGHT_PLOT
    return {**base, "bg": pal.plot_bg, "fg": pal.plot_fg, "text": pal.text, "dim": pal.text_dim}


WARNING_COLORS = {False: {"bg": "#fff4e6", "fg": "#862e0b", "border": "#ffc078"},
                  True: {"bg": "#3a2a14", "fg": "#ffc078", "border": "#8a5a1e"}}
# The main window's message strip: (background, text and border) per theme and level.
MESSAGE_COLORS = {
    False: {"error": ("#fff5f5", "#c92a2a"), "info": ("#f1f8ff", "#1f5fa8")},
    True: {"error": ("#3a1f22", "#ff8a8a"), "info": ("#1a2a40", "#8ab8ff")},
}
ERROR_TEXT = {False: "#c92a2a", True: "#ff8a8a"}
# Rank tables: (slowest rank's row background, selected row background, selected row text)
RANK_ROW_COLORS = {False: ("#ffe3e3", "#d0e2ff", "#212529"),
                   True: ("#4a2226", "#27395a", "#e7e9ec")}


def warning_colors() -> dict:
    """Background, text and border of a warning strip under the current theme."""
    return WARNING_COLORS[bool(plot_theme()["dark"])]


def message_colors(level: str) -> tuple[str, str]:
    """(background, text/border) of a message strip of `level` ("error" or "info")."""
    styles = MESSAGE_COLORS[bool(plot_theme()["dark"])]
    return styles.get(level, styles["info"])


def error_text() -> str:
    return ERROR_TEXT[bool(plot_theme()["dark"])]


def rank_row_colors() -> tuple[str, str, str]:
    """(slowest row background, selected row background, selected row text) of the rank
    tables under the current theme."""
    return RANK_ROW_COLORS[bool(plot_theme()["dark"])]


def follow_theme(slot) -> None:
    """Call `slot(name)` when the app's theme changes (a bound method of a QObject, so Qt
    drops the connection when that object is destroyed)."""
    try:
        from stallscope.gui import theme
    except ImportError:
        return
    theme.controller().sig_theme_changed.connect(slot)


# Line heatmap: a sequential scale (light yellow -> deep red) by a line's share of the time, the
# text drawn on it (dark on the light end, white on the dark end), the frame of the selected line
# and the legend's border.
HEAT_STOPS = ((0.0, "#fff9db"), (0.25, "#ffe066"), (0.5, "#ffa94d"), (0.75, "#f76707"),
              (1.0, "#c92a2a"))
HEAT_TEXT_DARK = "#1d2229"
HEAT_TEXT_LIGHT = "#ffffff"
SELECTION_FRAME = "#1c7ed6"
LEGEND_BORDER = "#adb5bd"
