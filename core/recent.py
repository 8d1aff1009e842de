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


def item_kind(path: str | os.PathLike[str]) -> str:
    """What the list shows a path as: 'session' for a runner's session folder, else 'trace'."""
    from stallscope.core.session.reader import is_session  # numpy: not before the app shows

    try:
        return "session" if is_session(path) else "trace"
    except (OSError, ValueError):  # a NUL byte, a path the OS refuses
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
        try:
            return Path(self.path).exists()
        except (OSError, ValueError):  # a NUL byte or a lone surrogate in a damaged list
            return False


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
            kind=kind if kind in KINDS else item_kind(key),
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
