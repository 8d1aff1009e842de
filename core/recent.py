"""Recently opened traces and sessions, each with its headline figure.

The list is one JSON file in the user config dir:
$STALLSCOPE_CONFIG_DIR, else $XDG_CONFIG_HOME/stallscope, else ~/.config/stallscope
(%APPDATA%/stallscope on Windows, ~/Library/Application Support/stallscope on macOS).

    store = RecentStore()
    store.add("/runs/a.pt.trace.json.gz", headline=headline(report))
    for item in store.items(): ...
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

FILE_NAME = "recent.json"
MAX_ITEMS = 12
KINDS = ("trace", "session")

CAUSE_LABELS = {
    "data_loading": "data loading",
    "sync": "CPU-GPU syncs",
    "optimizer": "the optimizer step",
    "cpu_ops": "CPU-side ops",
    "uncovered": "unattributed gaps",
}


def config_dir() -> Path:
    """Where stallscope keeps its settings; tests point STALLSCOPE_CONFIG_DIR at a tmp dir."""
    override = os.environ.get("STALLSCOPE_CONFIG_DIR")
    if override:
        return Path(override)
    if sys.platform == "win32" and os.environ.get("APPDATA"):
        return Path(os.environ["APPDATA"]) / "stallscope"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "stallscope"
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "stallscope"


def kind_of(path: str | os.PathLike[str]) -> str:
    """'session' for a session folder (it has run.json or events.jsonl), else 'trace'."""
    p = Path(path)
    if p.is_dir() and ((p / "run.json").exists() or (p / "events.jsonl").exists()):
        return "session"
    return "trace"


@dataclass(frozen=True)
class RecentItem:
    path: str
    kind: str  # "trace" | "session"
    opened: float  # unix time of the last open
    headline: str = ""

    @property
    def name(self) -> str:
        return Path(self.path).name or self.path

    @property
    def exists(self) -> bool:
        return Path(self.path).exists()


class RecentStore:
    """The recent list, newest first, at most `max_items`; every change is written at once."""

    def __init__(self, path: Path | None = None, max_items: int = MAX_ITEMS) -> None:
        self.path = Path(path) if path is not None else config_dir() / FILE_NAME
        self.max_items = max_items

    def items(self) -> list[RecentItem]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError):
            self._set_aside_unreadable()
            return []
        entries = raw.get("items", []) if isinstance(raw, dict) else []
        items = [it for it in map(_item_from_json, entries) if it is not None]
        return sorted(items, key=lambda it: it.opened, reverse=True)[: self.max_items]

    def add(
        self,
        path: str | os.PathLike[str],
        kind: str | None = None,
        headline: str | None = None,
        opened: float | None = None,
    ) -> RecentItem:
        """Put `path` first; a headline of None keeps the one remembered from last time."""
        key = _normalise(path)
        old = {it.path: it for it in self.items()}
        previous = old.pop(key, None)
        item = RecentItem(
            path=key,
            kind=kind if kind in KINDS else kind_of(key),
            opened=time.time() if opened is None else float(opened),
            headline=headline if headline is not None else (previous.headline if previous else ""),
        )
        self._write([item, *old.values()])
        return item

    def set_headline(self, path: str | os.PathLike[str], headline: str) -> bool:
        key = _normalise(path)
        items = self.items()
        for i, it in enumerate(items):
            if it.path == key:
                items[i] = RecentItem(it.path, it.kind, it.opened, headline)
                self._write(items)
                return True
        return False

    def remove(self, path: str | os.PathLike[str]) -> bool:
        key = _normalise(path)
        items = self.items()
        kept = [it for it in items if it.path != key]
        if len(kept) != len(items):
            self._write(kept)
        return len(kept) != len(items)

    def clear(self) -> None:
        self._write([])

    def _write(self, items: list[RecentItem]) -> None:
        items = sorted(items, key=lambda it: it.opened, reverse=True)[: self.max_items]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        payload = {"version": 1, "items": [asdict(it) for it in items]}
        tmp.write_text(json.dumps(payload, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)  # atomic: a crash never leaves half a file

    def _set_aside_unreadable(self) -> None:
        # Keep the damaged file for inspection instead of silently overwriting it.
        try:
            os.replace(self.path, self.path.with_name(self.path.name + ".unreadable"))
        except OSError:
            pass


def _normalise(path: str | os.PathLike[str]) -> str:
    return str(Path(path).expanduser().absolute())


def _item_from_json(entry: Any) -> RecentItem | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
        return None
    try:
        opened = float(entry.get("opened", 0.0))
    except (TypeError, ValueError):
        opened = 0.0
    kind = entry.get("kind")
    headline = entry.get("headline")
    return RecentItem(
        path=entry["path"],
        kind=kind if kind in KINDS else "trace",
        opened=opened,
        headline=headline if isinstance(headline, str) else "",
    )


def headline(report: Any) -> str:
    """One line that sums up a Report, e.g. "GPU idle 44%, mostly data loading".

    With several GPUs it speaks of the one that idles most; with none, of the CPU steps.
    """
    devices = getattr(report, "devices", None) or {}
    window = _window_us(report)
    if not devices:
        return _cpu_only_headline(report, window)
    dev, stats = max(devices.items(), key=lambda kv: (kv[1].idle_us, str(kv[0])))
    who = "GPU" if len(devices) == 1 else f"GPU {dev} (worst of {len(devices)})"
    total = stats.busy_us + stats.idle_us
    idle_frac = stats.idle_us / total if total > 0 else 0.0
    if idle_frac < 0.05:
        return f"{who} busy {_pct(1.0 - idle_frac)}, no idle time worth chasing"
    causes = {k: v for k, v in (stats.idle_by_cause or {}).items() if v > 0}
    if not causes:
        return f"{who} idle {_pct(idle_frac)}"
    cause, cause_us = max(causes.items(), key=lambda kv: kv[1])
    share = cause_us / stats.idle_us if stats.idle_us > 0 else 0.0
    label = CAUSE_LABELS.get(cause, cause.replace("_", " "))
    if share >= 0.5:
        return f"{who} idle {_pct(idle_frac)}, mostly {label}"
    return f"{who} idle {_pct(idle_frac)}, largest cause {label} ({_pct(share)} of it)"


def _cpu_only_headline(report: Any, window: float) -> str:
    steps = getattr(report, "steps", None) or []
    step_us = sum(float(st.dur_us) for st in steps)
    data_us = sum(float(st.data_loading_us) for st in steps)
    if step_us > 0 and data_us / step_us >= 0.05:
        return f"No GPU in trace; steps wait on data loading {_pct(data_us / step_us)} of the time"
    count = f"{len(steps)} step" + ("" if len(steps) == 1 else "s")
    span = f" over {_fmt_duration(window)}" if window > 0 else ""
    return f"No GPU in trace (CPU only), {count}{span}"


def _window_us(report: Any) -> float:
    window = getattr(report, "window", None)
    if not window:
        return 0.0
    lo, hi = window
    return max(0.0, float(hi) - float(lo))


def _pct(frac: float) -> str:
    return f"{round(frac * 100):d}%"


def _fmt_duration(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.1f} s"
    if us >= 1e3:
        return f"{us / 1e3:.0f} ms"
    return f"{us:.0f} µs"
