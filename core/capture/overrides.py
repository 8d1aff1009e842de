"""DataLoader settings changed without editing the script (`--set`), and a record of every
DataLoader the script builds: its call site, its arguments as passed and as overridden.

    --set num_workers=4                 every DataLoader
    --set 2:num_workers=4               the second DataLoader the script builds
    --set train.py:57:num_workers=4     the one built at train.py line 57 (a path suffix matches)

A narrower choice wins over a wider one (site > creation order > all); among equals the last
`--set` wins. Values are checked before the script starts (`parse_sets`); a combination only
the script's own arguments make impossible (prefetch_factor on a loader that keeps
num_workers=0) is dropped at run time with a note. Standard library at import (torch when
installed into a run).
"""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

KEYS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")
DEFAULTS = {"num_workers": 0, "pin_memory": False, "persistent_workers": False,
            "prefetch_factor": None}
DEFAULT_PREFETCH = 2  # torch's prefetch_factor when workers run and none is given
NEEDS_WORKERS = ("prefetch_factor", "persistent_workers")
TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})
MAX_EVENTS = 100  # DataLoaders recorded one by one; later ones only count in the summary
FORMS = "KEY=VALUE, N:KEY=VALUE (the N-th DataLoader built) or FILE:LINE:KEY=VALUE"


INSTALLED_PARTS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
# A framework's settings object that builds the DataLoader: its attributes dataloader_<key>
# (HF TrainingArguments: dataloader_num_workers, dataloader_pin_memory, ...).
SETTING_PREFIX = "dataloader_"


class OverrideError(ValueError):
    """A `--set` that cannot apply; one line for the user."""


@dataclass(frozen=True)
class Override:
    key: str
    value: int | bool
    index: int | None = None  # 1-based creation order
    file: str | None = None
    line: int | None = None

    @property
    def scope(self) -> str:
        if self.file is not None:
            return f"{self.file}:{self.line}"
        return str(self.index) if self.index is not None else ""

    @property
    def precedence(self) -> int:
        return 2 if self.file is not None else 1 if self.index is not None else 0

    @property
    def text(self) -> str:
        scope = self.scope
        return (f"{scope}:" if scope else "") + f"{self.key}={format_value(self.value)}"

    def matches(self, index: int, filename: str, line: int) -> bool:
        if self.file is not None:
            return line == self.line and same_file(self.file, filename)
        return self.index is None or self.index == index


def same_file(selector: str, filename: str) -> bool:
    """`train.py` or `src/train.py` names /home/me/src/train.py; so does its full path."""
    sel = Path(selector).as_posix()
    sel = sel[2:] if sel.startswith("./") else sel
    full = Path(filename).as_posix()
    return full == sel or full.endswith("/" + sel) or (
        os.path.isabs(selector) and os.path.realpath(selector) == os.path.realpath(filename))


def format_value(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def parse_value(key: str, raw: str, text: str) -> int | bool:
    word = raw.strip().lower()
    if key in ("pin_memory", "persistent_workers"):
        if word in TRUE:
            return True
        if word in FALSE:
            return False
        raise OverrideError(f"--set {text}: {key} takes true or false, not {raw!r}")
    try:
        number = int(word)
    except ValueError:
        raise OverrideError(f"--set {text}: {key} takes a whole number, not {raw!r}") from None
    low = 1 if key == "prefetch_factor" else 0
    if number < low:
        raise OverrideError(f"--set {text}: {key} must be >= {low}")
    return number


def parse_set(text: str) -> Override:
    left, sep, raw = text.partition("=")
    if not sep or not left.strip():
        raise OverrideError(f"--set {text}: expected {FORMS}")
    scope, _, key = left.strip().rpartition(":")
    key = key.strip()
    if key not in KEYS:
        raise OverrideError(f"--set {text}: unknown key {key!r} (known: {', '.join(KEYS)})")
    value = parse_value(key, raw, text)
    if not scope:
        return Override(key, value)
    if scope.isdigit():
        if int(scope) < 1:
            raise OverrideError(f"--set {text}: DataLoaders count from 1")
        return Override(key, value, index=int(scope))
    file, _, line = scope.rpartition(":")
    if not file or not line.isdigit() or int(line) < 1:
        raise OverrideError(f"--set {text}: expected {FORMS}")
    return Override(key, value, file=file, line=int(line))


def parse_sets(texts: list[str] | None) -> list[Override]:
    """Parse and check every `--set`; raises OverrideError naming the first bad one."""
    out = [parse_set(t) for t in texts or []]
    wide = {o.key: o for o in out if o.precedence == 0}
    for scope in dict.fromkeys(o.scope for o in out):
        chosen = dict(wide)
        chosen.update({o.key: o for o in out if o.scope == scope})
        workers = chosen.get("num_workers")
        if workers is None or workers.value != 0:
            continue
        for key in NEEDS_WORKERS:
            other = chosen.get(key)
            if other is not None and other.value not in (False, None):
                raise OverrideError(f"--set {other.text}: {key} needs worker processes, but "
                                    f"--set {workers.text} asks for none")
    return out


def choose(overrides: list[Override], index: int, filename: str, line: int) -> dict:
    """{key: Override} that apply to one DataLoader."""
    chosen: dict[str, Override] = {}
    for o in sorted(overrides, key=lambda o: o.precedence):  # stable: among equals, last wins
        if o.matches(index, filename, line):
            chosen[o.key] = o
    return chosen


def effective(values: dict) -> dict:
    """The four settings as torch will use them (prefetch_factor defaults to 2 with workers)."""
    out = {k: values.get(k, DEFAULTS[k]) for k in KEYS}
    if out["prefetch_factor"] is None and out["num_workers"]:
        out["prefetch_factor"] = DEFAULT_PREFETCH
    return out


def apply(passed: dict, chosen: dict) -> tuple[dict, list[str]]:
    """The new values of the four settings for a loader the script built with `passed`, and
    notes on what was dropped to keep the combination valid for torch."""
    values = {k: passed.get(k, DEFAULTS[k]) for k in KEYS}
    values.update({k: o.value for k, o in chosen.items()})
    notes = []
    if not values["num_workers"]:
        for key in NEEDS_WORKERS:
            if values[key] in (None, False, DEFAULTS[key]):
                continue
            if key in chosen:
                notes.append(f"--set {chosen[key].text} ignored: this DataLoader has no "
                             "worker processes (num_workers=0)")
            else:
                notes.append(f"{key}={values[key]!r} dropped: num_workers=0 takes none")
            values[key] = DEFAULTS[key]
    return values, notes


def jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value if not isinstance(value, str) or len(value) <= 200 else value[:200] + "…"
    if isinstance(value, (list, tuple)) and len(value) <= 8:
        return [jsonable(v) for v in value]
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    return f"<{name}>" if isinstance(name, str) else f"<{type(value).__name__}>"


class DataLoaderLog:
    """Patches DataLoader.__init__: records each loader's call site and arguments and applies
    the overrides. Batches are counted per call site (the step hooks call `count`)."""

    def __init__(self, overrides: list[Override], emit, pid: int | None = None) -> None:
        self.overrides = overrides
        self.emit = emit  # emit(kind, **fields)
        self.pid = pid if pid is not None else os.getpid()
        self.created = 0
        self.sites: dict[str, dict] = {}
        self.batches: dict[str, int] = {}
        self.used: set[Override] = set()
        self._skip_dirs: tuple[str, ...] = ()
        self._library_dirs: tuple[str, ...] = ()

    def install(self, torch) -> list:
        from torch.utils.data import DataLoader

        self._skip_dirs = (str(Path(torch.__file__).resolve().parent) + os.sep,
                           str(Path(__file__).resolve().parent) + os.sep)
        self._library_dirs = library_dirs()
        original_init = DataLoader.__init__
        original_get = DataLoader._get_iterator
        signature = inspect.signature(original_init)
        log = self

        def init(self, *args, **kwargs):
            if os.getpid() == log.pid:
                args, kwargs = log.on_init(self, signature, args, kwargs)
            return original_init(self, *args, **kwargs)

        def get_iterator(self):
            it = original_get(self)
            try:
                it._stallscope_site = self.__dict__.get("_stallscope_site")
            except Exception:  # noqa: BLE001 - an iterator with __slots__: not counted
                pass
            return it

        init.__wrapped__ = original_init  # type: ignore[attr-defined]  # the undo mark
        DataLoader.__init__ = init
        DataLoader._get_iterator = get_iterator
        return [lambda: setattr(DataLoader, "__init__", original_init),
                lambda: setattr(DataLoader, "_get_iterator", original_get)]

    def count(self, iterator) -> None:
        site = getattr(iterator, "_stallscope_site", None)
        if site is not None:
            self.batches[site] = self.batches.get(site, 0) + 1

    def call_site(self, loader) -> Site:
        """Where the user's code built this loader: the first frame outside torch, the runner,
        installed packages and the standard library (so a framework that re-creates the
        user's DataLoader, Lightning or accelerate, maps back to the user's line). A loader
        built from another one in those frames takes that one's site; one a framework builds
        from its own settings (HF Trainer's TrainingArguments) says which settings."""
        frame: FrameType | None = sys._getframe(3)  # on_init <- init wrapper <- the caller
        first_outside_torch = None
        source = settings = None
        while frame is not None:
            code = frame.f_code
            name = code.co_filename
            if name.startswith(self._skip_dirs) or (
                    code.co_name == "__init__" and frame.f_locals.get("self") is loader):
                frame = frame.f_back  # torch's own code, or a DataLoader subclass's __init__
                continue
            if first_outside_torch is None:
                first_outside_torch = frame
            if not self.installed(name):
                return Site(name, frame.f_lineno, code.co_name, source, settings)
            source = source or built_from(loader, frame.f_locals)
            settings = settings or framework_settings(frame.f_locals)
            frame = frame.f_back
        if first_outside_torch is not None:  # nothing of the user's on the stack
            code = first_outside_torch.f_code
            return Site(code.co_filename, first_outside_torch.f_lineno, code.co_name, source,
                        settings)
        return Site("<unknown>", 0, "", source, settings)

    def installed(self, filename: str) -> bool:
        """Code the user did not write: site-/dist-packages, the standard library, frozen."""
        return (filename.startswith(self._library_dirs) or filename.startswith("<")
                or any(part in filename for part in INSTALLED_PARTS))

    def on_init(self, loader, signature, args, kwargs):
        try:
            bound = signature.bind(loader, *args, **kwargs)
        except TypeError:
            return args, kwargs  # torch raises its own error for these arguments
        self.created += 1
        index = self.created
        found = self.call_site(loader)
        if found.source is not None:  # re-created from the user's loader: the user's line
            filename, line, function = found.source["file"], found.source["line"], found.source[
                "function"]
        else:
            filename, line, function = found.file, found.line, found.function
        site = f"{display_path(filename)}:{line}"
        passed = {k: v for k, v in bound.arguments.items() if k not in ("self", "dataset")}
        chosen = choose(self.overrides, index, filename, line)
        self.used.update(chosen.values())
        before = {k: passed.get(k, DEFAULTS[k]) for k in KEYS}
        values, notes = apply(passed, chosen)
        changed = {k: {"from": before[k], "to": values[k]} for k in KEYS
                   if values[k] != before[k]}
        if changed:
            bound.arguments.update({k: values[k] for k in changed})
            args, kwargs = bound.args[1:], bound.kwargs
        loader.__dict__["_stallscope_site"] = site
        loader.__dict__["_stallscope_where"] = {"file": filename, "line": line,
                                                "function": function}
        dataset = bound.arguments.get("dataset")
        info = {"site": site, "file": filename, "line": line, "function": function,
                "dataset": type(dataset).__name__, "iterable": _iterable(dataset),
                "passed": {k: jsonable(v) for k, v in passed.items()},
                "overridden": changed, "effective": effective(values)}
        if found.settings:
            made = settings_line(filename, line, str(found.settings.get("owner") or ""))
            info["settings"] = {**found.settings, **({"site": f"{display_path(filename)}:"
                                                      f"{made}"} if made else {})}
        entry = self.sites.setdefault(site, {"created": 0})
        if found.source is None or not entry["created"]:
            entry.update(info)  # a re-created loader keeps what the user's own one passed
        entry["created"] += 1
        if index <= MAX_EVENTS:
            extra = {"rebuilt_from": site} if found.source is not None else {}
            self.emit("dataloader", index=index, notes=notes, **info, **extra)
        for note in notes:
            self.emit("warning", source="overrides", message=f"{site}: {note}")
        return args, kwargs

    def summary(self) -> list[dict]:
        return [{**entry, "batches": self.batches.get(site, 0)}
                for site, entry in self.sites.items()]

    def unmatched(self) -> list[str]:
        built = ", ".join(self.sites) or "none"
        return [f"--set {o.text} matched no DataLoader (the script built {self.created}: {built})"
                for o in self.overrides if o not in self.used]


@dataclass(frozen=True)
class Site:
    file: str
    line: int
    function: str
    source: dict | None = None    # the loader this one was re-created from: its file/line
    settings: dict | None = None  # {"owner": "TrainingArguments", "names": {key: attribute}}


def library_dirs() -> tuple[str, ...]:
    """The standard library's folders (site-packages are matched by name)."""
    import sysconfig

    paths = sysconfig.get_paths()
    found = [paths[k] for k in ("stdlib", "platstdlib") if paths.get(k)]
    return tuple(sorted({os.path.join(p, "") for d in found for p in (d, os.path.realpath(d))}))


def built_from(loader, local_vars: dict) -> dict | None:
    """A DataLoader among a framework frame's locals that this one is re-created from."""
    from torch.utils.data import DataLoader

    for value in local_vars.values():
        if value is loader:
            continue
        try:
            if isinstance(value, DataLoader):
                where = getattr(value, "_stallscope_where", None)
                if isinstance(where, dict):
                    return where
        except Exception:  # noqa: BLE001 - a wrapper's __getattr__ may raise anything
            continue
    return None


def framework_settings(local_vars: dict) -> dict | None:
    """The settings object a framework method (`self`) builds its DataLoader from: `self.args`
    with attributes dataloader_num_workers, ... (HF Trainer)."""
    owner = local_vars.get("self")
    try:
        args = getattr(owner, "args", None)
        names = {k: SETTING_PREFIX + k for k in KEYS if hasattr(args, SETTING_PREFIX + k)}
    except Exception:  # noqa: BLE001
        return None
    if "num_workers" not in names:
        return None
    return {"owner": type(args).__name__, "names": names}


def settings_line(filename: str, before: int, owner: str) -> int | None:
    """The line of the user's file where the settings object is made (`owner(`, e.g.
    TrainingArguments(...)): the last such call at or above `before` (the line that made the
    framework build the loader), else the first one in the file; None when there is none."""
    import ast

    if not owner:
        return None
    try:
        with open(filename, "rb") as f:
            tree = ast.parse(f.read(1 << 22))
    except (OSError, SyntaxError, ValueError):
        return None
    lines = sorted(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
                   and owner == (getattr(node.func, "id", None) or getattr(node.func, "attr",
                                                                            None)))
    above = [n for n in lines if n <= before]
    return above[-1] if above else (lines[0] if lines else None)


def change_line(loader: dict, changes: dict) -> str:
    """The line to edit for a recorded DataLoader (a run.json `dataloaders` entry) and new
    settings, as tune and the DataLoader card say it:
    "train.py:41: DataLoader(..., num_workers=0) -> num_workers=2", or, where a framework builds
    the loader from its own settings, "train.py:30: TrainingArguments(dataloader_num_workers=0)
    -> dataloader_num_workers=2" (line 30: where the script makes the settings object, not the
    trainer.train() that made the framework build the loader)."""
    site = str(loader.get("site") or "")
    passed = _as_dict(loader.get("passed"))
    settings = _as_dict(loader.get("settings"))
    names = _as_dict(settings.get("names"))
    after_keys = [k for k in changes if k in KEYS]
    if names:
        before = ", ".join(f"{names[k]}={passed.get(k, DEFAULTS[k])!r}" for k in after_keys
                           if k in names)
        after = ", ".join(f"{names.get(k, k)}={changes[k]!r}" for k in after_keys)
        where = str(settings.get("site") or site)  # where the settings object is made
        return f"{where}: {settings.get('owner') or 'settings'}({before}) -> {after}"
    before = ", ".join(f"{k}={passed[k]!r}" for k in KEYS if k in passed)
    after = ", ".join(f"{k}={changes[k]!r}" for k in after_keys)
    call = f"DataLoader(..., {before})" if before else "DataLoader(...)"
    return f"{site}: {call} -> {after}"


def _as_dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def display_path(filename: str) -> str:
    """A call site's file as the user knows it: relative to the working folder when inside."""
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith("..") else rel


def _iterable(dataset) -> bool:
    """An IterableDataset: its workers each iterate the whole stream unless it shards itself
    (the advice says so before it proposes workers)."""
    try:
        from torch.utils.data import IterableDataset

        return isinstance(dataset, IterableDataset)
    except Exception:  # noqa: BLE001 - a dataset whose isinstance check fails: not known
        return False
