"""Capture side of the line heatmap: line-profile Dataset.__getitem__ inside the user's script.

Long because it is one self-contained file on purpose: a DataLoader worker started with "spawn"
re-imports it by path from its worker_init_fn (WorkerInit), before any package exists in that
process, so the wrappers, the worker writer and the merge must live in the one module it loads.

This file runs in the user's interpreter next to the runner, loaded by file path and registered
as sys.modules["stallscope_lineprof_capture"]. It may import only the standard library, torch and
line_profiler, never stallscope.

    capture = start(target, depth, out_dir, emit)   # before the script runs
    capture.on_dataloader(loader)                   # from the patched DataLoader.__iter__
    path = capture.finish()                         # at the end: lineprof/<Class.method>.json

Each profiled function is replaced on its owner (class or module) by a counting wrapper that turns
the profiler on for the duration of the call (kernprof's @profile does the same), so `samples`
is an exact call count. DataLoader workers install the same wrappers from a worker_init_fn
(under fork they inherit them, and subtract what the parent had recorded before the fork) and
write their stats to lineprof/.parts/ at worker exit (multiprocessing Finalize, which the worker
process runs when torch's worker loop ends) and, as a fallback for workers that get killed,
from a flush thread a few times a second. finish() merges the parts.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import shlex
import sys
import threading
import time
import types
import weakref
from collections.abc import Callable
from typing import Any

MODULE_NAME = "stallscope_lineprof_capture"
FORMAT_VERSION = 1
FLUSH_INTERVAL_S = 0.25
PARTS_DIR = ".parts"
_MARK = "__stallscope_lineprof__"


def install_command(python: str | None = None) -> list[str]:
    """The command that installs line_profiler into the interpreter that runs the script."""
    return [python or sys.executable, "-m", "pip", "install", "line_profiler"]


# ---------------------------------------------------------------------------------------------
# Per-process state. A forked worker inherits the parent's; a spawned worker starts empty.


class _Target:
    """One profiled function: where it lives (to patch it again in a spawned worker)."""

    def __init__(self, file: str, qualname: str, func: types.FunctionType, owner, attr: str,
                 root: bool) -> None:
        self.file = file
        self.qualname = qualname
        self.func = func
        self.owner = owner
        self.attr = attr
        self.root = root
        self.wraps: list[str] = []
        self.unprofiled: list[str] = []  # the user's functions it calls, not profiled

    @property
    def key(self) -> tuple[str, str]:
        return (self.file, self.qualname)

    def spec(self) -> dict:
        return {"file": self.file, "qualname": self.qualname, "root": self.root}


class _ProcState:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.profiler = None
        self.targets: dict[tuple[str, str], _Target] = {}
        self.calls: dict[tuple[str, str], int] = {}
        self.baseline_calls: dict[tuple[str, str], int] = {}
        self.baseline_timings: dict = {}
        self.warnings: list[str] = []
        self.lock = threading.Lock()

    def ensure_profiler(self):
        if self.profiler is None:
            from line_profiler import LineProfiler

            self.profiler = LineProfiler()
        return self.profiler


_STATE = _ProcState()


# ---------------------------------------------------------------------------------------------
# Finding what to profile.


def _real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, TypeError, ValueError):
        return str(path)


def _unwrap_callable(raw) -> tuple[types.FunctionType | None, Callable[[Callable], Any]]:
    """The Python function behind a class attribute, and how to re-wrap a replacement."""
    if isinstance(raw, staticmethod):
        inner, rewrap = _unwrap_callable(raw.__func__)
        return inner, lambda f: staticmethod(rewrap(f))
    if isinstance(raw, classmethod):
        inner, rewrap = _unwrap_callable(raw.__func__)
        return inner, lambda f: classmethod(rewrap(f))
    if isinstance(raw, types.FunctionType):
        return raw, lambda f: f
    return None, lambda f: f


def _why_not_profilable(name: str, raw) -> str | None:
    func, _ = _unwrap_callable(raw)
    if func is None:
        kind = type(raw).__name__
        return (f"{name} is a {kind}, defined in C (not Python source): line_profiler cannot "
                "profile it line by line")
    if func.__name__ == "<lambda>":
        return (f"{name} is a lambda: line_profiler cannot split a one-line lambda into lines; "
                "define it with def to see a line heatmap")
    if not func.__code__.co_code or func.__code__.co_filename.startswith("<"):
        return (f"{name} has no source file ({func.__code__.co_filename}): "
                "it cannot be shown line by line")
    return None


def _defining_class(cls: type, attr: str) -> type | None:
    for klass in cls.__mro__:
        if attr in klass.__dict__:
            return klass
    return None


def _is_torch_class(klass: type) -> bool:
    mod = getattr(klass, "__module__", "") or ""
    return mod == "builtins" or mod.split(".")[0] == "torch"


def _is_abstract_getitem(klass: type) -> bool:
    return klass.__name__ == "Dataset" and klass.__module__ == "torch.utils.data.dataset"


def _dataset_chain(dataset) -> list[tuple[object, list[object]]]:
    """(dataset, inner datasets) for the dataset and everything it wraps: Subset, ConcatDataset
    and any wrapper that keeps its source in `.dataset` / `.datasets`."""
    out, stack, seen = [], [dataset], set()
    while stack:
        ds = stack.pop()
        if id(ds) in seen or ds is None:
            continue
        seen.add(id(ds))
        inner: list = []
        many = getattr(ds, "datasets", None)
        if isinstance(many, (list, tuple)):
            inner.extend(many)
        one = getattr(ds, "dataset", None)
        if one is not None and one is not ds and not isinstance(one, (str, bytes, int, float)):
            inner.append(one)
        out.append((ds, inner))
        stack.extend(reversed(inner))
    return out


def _method_of(ds) -> str:
    """What the DataLoader calls for each sample: an IterableDataset's __iter__ (a generator,
    profiled line by line through every resumption), else __getitem__."""
    from torch.utils.data import IterableDataset

    return "__iter__" if isinstance(ds, IterableDataset) else "__getitem__"


def _module_label(klass: type) -> str:
    mod = getattr(klass, "__module__", "") or ""
    if mod in ("__main__", "__mp_main__"):
        return "__main__ (the class is defined in the script itself)"
    return mod


def _auto_classes(dataset) -> tuple[list[tuple[type, str, list[type]]], list[str]]:
    """(class, method, the profiled classes it wraps) to profile: __getitem__, or __iter__ of
    an IterableDataset."""
    chain = _dataset_chain(dataset)
    warnings: list[str] = []
    defining: dict[int, type] = {}
    methods: dict[int, str] = {}
    for ds, _ in chain:
        attr = _method_of(ds)
        klass = _defining_class(type(ds), attr)
        # torch's abstract Dataset.__getitem__ only raises; IterableDataset.__iter__ is torch's
        if klass is not None and not _is_abstract_getitem(klass) and not (
                attr == "__iter__" and _is_torch_class(klass)):
            defining[id(ds)] = klass
            methods[id(ds)] = attr
    user = [ds for ds, _ in chain if id(ds) in defining and not _is_torch_class(defining[id(ds)])]
    if not user:
        # Nothing of the user's: profile the innermost dataset that has a __getitem__
        # (TensorDataset and the like), so the user still sees where the time goes.
        user = [ds for ds, inner in chain if id(ds) in defining and not inner][-1:]
    if not user:
        klass = type(dataset)
        warnings.append(
            f"{klass.__name__} has no __getitem__ nor __iter__ of its own: nothing to "
            f"line-profile; pass --lineprof module:Class.method to profile a method of your "
            f"choice (module {_module_label(klass)})")
        return [], warnings
    picked = {id(ds) for ds in user}
    result = []
    for ds, _ in chain:
        if id(ds) not in picked:
            continue
        below = {id(x) for x, _ in _dataset_chain(ds)} - {id(ds)}
        wraps = [defining[i] for i in below if i in picked]
        result.append((defining[id(ds)], methods[id(ds)], wraps))
    return result, warnings


def _modules_for_file(path: str) -> list[types.ModuleType]:
    want = _real(path)
    mods = []
    for mod in list(sys.modules.values()):
        file = getattr(mod, "__file__", None)
        if isinstance(file, str) and _real(file) == want:
            mods.append(mod)
    return mods


def _walk_qualname(mod: types.ModuleType, qualname: str):
    """(owner, attr, raw attribute) for `Class.method` or `function` inside a module."""
    parts = qualname.split(".")
    owner: object = mod
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    last = parts[-1]
    if isinstance(owner, type):
        klass = _defining_class(owner, last)
        if klass is None:
            return None
        return klass, last, klass.__dict__[last]
    if not hasattr(owner, last):
        return None
    return owner, last, getattr(owner, last)


def _names_in(mod: types.ModuleType, qualname: str) -> str:
    """What a user could have meant, for a 'target not found' message."""
    parts = qualname.split(".")
    owner: object = mod
    for part in parts[:-1]:
        nxt = getattr(owner, part, None)
        if nxt is None:
            break
        owner = nxt
    if isinstance(owner, type):
        names = sorted(n for k in owner.__mro__ if not _is_torch_class(k) and k is not object
                       for n, v in vars(k).items()
                       if callable(v) or isinstance(v, (staticmethod, classmethod)))
        return f"methods of {owner.__name__}: {', '.join(dict.fromkeys(names)) or '(none)'}"
    classes = sorted(n for n, v in vars(owner).items()
                     if isinstance(v, type) and v.__module__ == getattr(owner, "__name__", None))
    with_getitem = [n for n in classes if "__getitem__" in vars(getattr(owner, n))]
    return (f"classes there: {', '.join(classes) or '(none)'}"
            + (f" (with __getitem__: {', '.join(with_getitem)})" if with_getitem else ""))


def parse_target(target: str) -> tuple[str, str]:
    """'pkg.mod:Class.method' or 'path/to/file.py:Class.method' -> (module or path, qualname)."""
    mod, sep, qual = target.rpartition(":")
    if not sep or not mod or not qual:
        raise ValueError(f"--lineprof target {target!r} is not module:Class.method "
                         "(or path/to/file.py:Class.method)")
    return mod, qual


def _resolve_explicit(target: str) -> tuple[tuple | None, str | None]:
    """((owner, attr, raw), None) when found; (None, why) otherwise."""
    where, qual = parse_target(target)
    if where.endswith(".py") or os.sep in where or "/" in where:
        mods = _modules_for_file(os.path.abspath(where))
        label = where
    else:
        names = [where] + (["__mp_main__"] if where == "__main__" else [])
        mods = [sys.modules[n] for n in names if n in sys.modules]
        label = f"module {where}"
    if not mods:
        main = sys.modules.get("__main__")
        if where != "__main__" and main is not None and _walk_qualname(main, qual) is not None:
            return None, (f"{label} was not imported by the script, but the script itself "
                          f"defines {qual}: a class of the script is in module __main__, so "
                          f"use --lineprof __main__:{qual}")
        return None, f"{label} was not imported by the script, so {qual} was not found"
    for mod in mods:
        found = _walk_qualname(mod, qual)
        if found is not None:
            return found, None
    return None, f"{qual} not found in {label}; {_names_in(mods[0], qual)}"


def _callees(func: types.FunctionType, klass: type | None) -> list[tuple[object, str, object]]:
    """Functions and methods `func` refers to by name that are the user's own code: defined in
    the same file, or in another file outside the standard library and installed packages
    (`helpers.augment(x)`, `from helpers import augment`)."""
    file = func.__code__.co_filename
    names: list[str] = []
    stack = [func.__code__]
    while stack:
        code = stack.pop()
        names.extend(code.co_names)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    names = list(dict.fromkeys(names))
    out: list[tuple[object, str, object]] = []
    seen: set[int] = set()
    for name in names:
        cands: list[tuple[object, str, object]] = []
        if klass is not None:
            owner = _defining_class(klass, name)
            if owner is not None:
                cands.append((owner, name, owner.__dict__[name]))
        glob = func.__globals__.get(name)
        if isinstance(glob, types.FunctionType):
            cands.append((func.__globals__, name, glob))
        elif isinstance(glob, types.ModuleType) and _is_users(getattr(glob, "__file__", None)):
            for attr in names:  # module.attr: both names are in co_names
                value = glob.__dict__.get(attr)
                if isinstance(value, types.FunctionType):
                    cands.append((glob.__dict__, attr, value))
        for holder, attr, raw in cands:
            inner, _ = _unwrap_callable(raw)
            if inner is None or inner is func:
                continue
            if inner.__code__.co_filename != file and not _is_users(inner.__code__.co_filename):
                continue
            if getattr(inner, _MARK, None) or id(inner) in seen:
                continue
            seen.add(id(inner))
            out.append((holder, attr, raw))
    return out


def _library_dirs() -> tuple[str, ...]:
    import sysconfig

    paths = sysconfig.get_paths()
    dirs = {_real(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(d.rstrip(os.sep) + os.sep for d in dirs)


_LIBRARY_DIRS: tuple[str, ...] | None = None


def _is_users(file: str | None) -> bool:
    """Whether a source file is the user's own code (not the standard library, not an installed
    package): its functions are followed by --lineprof-depth."""
    global _LIBRARY_DIRS
    if not file or file.startswith("<"):
        return False
    if _LIBRARY_DIRS is None:
        _LIBRARY_DIRS = _library_dirs()
    real = _real(file)
    parts = real.split(os.sep)
    return (not real.startswith(_LIBRARY_DIRS) and "site-packages" not in parts
            and "dist-packages" not in parts)


# ---------------------------------------------------------------------------------------------
# Installing wrappers.


def _make_wrapper(key: tuple[str, str], func: types.FunctionType):
    if inspect.isgeneratorfunction(func):
        return _make_generator_wrapper(key, func)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        st = _STATE
        st.calls[key] = st.calls.get(key, 0) + 1
        prof = st.profiler
        prof.enable_by_count()
        try:
            return func(*args, **kwargs)
        finally:
            prof.disable_by_count()

    setattr(wrapper, _MARK, key)
    return wrapper


def _make_generator_wrapper(key: tuple[str, str], func: types.FunctionType):
    """A generator function (an IterableDataset's __iter__): the profiler is on while the body
    runs, each time it is resumed (line_profiler's own generator wrapping does the same);
    `samples` counts the items it yields."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        st = _STATE
        gen = func(*args, **kwargs)
        sent = None
        while True:
            prof = st.profiler
            prof.enable_by_count()
            try:
                item = gen.send(sent)
            except StopIteration:
                return
            finally:
                prof.disable_by_count()
            st.calls[key] = st.calls.get(key, 0) + 1
            sent = yield item

    setattr(wrapper, _MARK, key)
    return wrapper


def _set_attr(owner, attr: str, value) -> None:
    if isinstance(owner, dict):  # a module's globals
        owner[attr] = value
    else:
        setattr(owner, attr, value)


def _install(owner, attr: str, raw, root: bool, st: _ProcState) -> _Target | None:
    func, rewrap = _unwrap_callable(raw)
    if func is None:
        return None
    existing = getattr(func, _MARK, None)
    if existing is not None:  # already ours (a forked worker inherits the patched class)
        return st.targets.get(tuple(existing))
    key = (_real(func.__code__.co_filename), func.__qualname__)
    if key in st.targets:
        return st.targets[key]
    st.ensure_profiler().add_function(func)
    # add_function may give the function a padded copy of its code; profile what it runs now.
    target = _Target(key[0], key[1], func, owner, attr, root)
    _set_attr(owner, attr, rewrap(_make_wrapper(key, func)))
    st.targets[key] = target
    st.calls.setdefault(key, 0)
    return target


def _install_with_callees(owner, attr, raw, depth: int, st: _ProcState,
                          warn: Callable[[str], None]) -> _Target | None:
    name = f"{getattr(owner, '__qualname__', getattr(owner, '__name__', ''))}.{attr}".lstrip(".")
    why = _why_not_profilable(name, raw)
    if why:
        warn(why)
        return None
    target = _install(owner, attr, raw, True, st)
    if target is None:
        return None
    frontier = [(target.func, owner if isinstance(owner, type) else None)]
    for _ in range(max(0, depth)):
        nxt = []
        for func, klass in frontier:
            for c_owner, c_attr, c_raw in _callees(func, klass):
                if _why_not_profilable(c_attr, c_raw):
                    continue
                sub = _install(c_owner, c_attr, c_raw, False, st)
                if sub is not None:
                    nxt.append((sub.func, c_owner if isinstance(c_owner, type) else None))
        frontier = nxt
    _note_unprofiled(frontier, st)
    return target


def _note_unprofiled(frontier: list, st: _ProcState) -> None:
    """On each function of the last level profiled: the user's functions it calls that are
    not profiled (past --lineprof-depth), whose time shows only on the line that calls them."""
    for func, klass in frontier:
        target = st.targets.get((_real(func.__code__.co_filename), func.__qualname__))
        if target is None:
            continue
        for _owner, attr, raw in _callees(func, klass):
            inner, _ = _unwrap_callable(raw)
            if inner is None or _why_not_profilable(attr, raw):
                continue
            if (_real(inner.__code__.co_filename), inner.__qualname__) in st.targets:
                continue
            if inner.__qualname__ not in target.unprofiled:
                target.unprofiled.append(inner.__qualname__)


# ---------------------------------------------------------------------------------------------
# Stats snapshots (one per process) and their files.


def _snapshot(st: _ProcState) -> tuple[float, list[dict]]:
    """This process's stats since it started profiling (minus what a fork inherited)."""
    if st.profiler is None:
        return 1e-9, []
    stats = st.profiler.get_stats()
    by_code = {(_real(f), q): (first, entries) for (f, first, q), entries in stats.timings.items()}
    base = st.baseline_timings
    funcs = []
    for key, target in list(st.targets.items()):
        first, entries = by_code.get(key, (target.func.__code__.co_firstlineno, []))
        before = base.get(key, {})
        lines = []
        for lineno, hits, t in entries:
            bh, bt = before.get(lineno, (0, 0))
            if hits - bh > 0:
                lines.append([int(lineno), int(hits - bh), int(t - bt)])
        calls = st.calls.get(key, 0) - st.baseline_calls.get(key, 0)
        funcs.append({"file": key[0], "qualname": key[1], "first_line": int(first),
                      "calls": int(calls), "root": target.root, "wraps": target.wraps,
                      "unprofiled": target.unprofiled,
                      "lines": lines})
    return float(stats.unit), funcs


def _set_baseline(st: _ProcState) -> None:
    if st.profiler is None:
        return
    stats = st.profiler.get_stats()
    st.baseline_timings = {
        (_real(f), q): {ln: (h, t) for ln, h, t in entries}
        for (f, _first, q), entries in stats.timings.items()
    }
    st.baseline_calls = dict(st.calls)


def _write_json(path: str, obj: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh)
    os.replace(tmp, path)


class _WorkerWriter:
    """Writes one worker's stats: at worker exit, and every FLUSH_INTERVAL_S while it changes."""

    def __init__(self, parts_dir: str, worker_id: int) -> None:
        self.path = os.path.join(parts_dir, f"worker-{os.getpid()}.json")
        self.worker_id = worker_id
        self.last_calls = -1
        self.lock = threading.Lock()
        self.final = False

    def write(self, final: bool = False) -> None:
        with self.lock:
            if self.final:
                return
            st = _STATE
            calls = sum(st.calls.values()) - sum(st.baseline_calls.values())
            if not final and calls == self.last_calls:
                return
            unit, funcs = _snapshot(st)
            _write_json(self.path, {"pid": os.getpid(), "worker_id": self.worker_id,
                                    "final": final, "unit": unit, "funcs": funcs,
                                    "warnings": list(st.warnings), "time": time.time()})
            self.last_calls = calls
            self.final = final

    def loop(self) -> None:
        while not self.final:
            time.sleep(FLUSH_INTERVAL_S)
            try:
                self.write()
            except Exception:  # noqa: BLE001 - a flush must never break the user's worker
                pass


def _load_capture_module(path: str) -> types.ModuleType:
    mod = sys.modules.get(MODULE_NAME)
    if mod is not None:
        return mod
    import importlib.util

    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    assert spec is not None and spec.loader is not None  # a .py file
    mod = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = mod
    spec.loader.exec_module(mod)
    return mod


# Run by pickle in a spawned worker: load this file as MODULE_NAME, then rebuild the init fn.
_BOOTSTRAP = (
    "exec(\"import importlib.util as u, sys\\n"
    "m = sys.modules.get(n)\\n"
    "if m is None:\\n"
    "    s = u.spec_from_file_location(n, p)\\n"
    "    m = u.module_from_spec(s)\\n"
    "    sys.modules[n] = m\\n"
    "    s.loader.exec_module(m)\\n"
    "r = m.WorkerInit(*a)\\n\", g) or g['r']"
)


class WorkerInit:
    """The worker_init_fn stallscope gives a DataLoader: installs the profiler in the worker,
    then calls the user's own worker_init_fn. Picklable under spawn without stallscope on the
    worker's path: it re-imports this file by path."""

    def __init__(self, parts_dir: str, specs: list[dict], user_fn=None,
                 module_file: str | None = None) -> None:
        self.parts_dir = parts_dir
        self.specs = specs
        self.user_fn = user_fn
        self.module_file = module_file or os.path.abspath(__file__)

    def __reduce__(self):
        g = {"n": MODULE_NAME, "p": self.module_file,
             "a": (self.parts_dir, self.specs, self.user_fn, self.module_file)}
        return (eval, (_BOOTSTRAP, {"g": g, "__builtins__": __builtins__}))

    def __call__(self, worker_id: int) -> None:
        try:
            _start_worker(self.parts_dir, self.specs, worker_id)
        except Exception as exc:  # noqa: BLE001 - profiling must never break the user's worker
            _STATE.warnings.append(f"worker {worker_id}: line profiling not installed: {exc}")
        if self.user_fn is not None:
            self.user_fn(worker_id)


def _start_worker(parts_dir: str, specs: list[dict], worker_id: int) -> None:
    global _STATE
    st = _STATE
    if st.pid != os.getpid():
        # Forked: the class attributes are already our wrappers, bound to the inherited
        # profiler. Keep it (a second profiler on the same code would fight over it) and count
        # only what happens from here on.
        st.pid = os.getpid()
        st.warnings = []
        st.lock = threading.Lock()
        _set_baseline(st)
    elif not st.targets:
        st.ensure_profiler()
    for spec in specs:  # spawned workers (and anything the fork missed) patch by name
        if tuple((spec["file"], spec["qualname"])) in st.targets:
            continue
        found = None
        for mod in _modules_for_file(spec["file"]):
            found = _walk_qualname(mod, spec["qualname"])
            if found is not None:
                break
        if found is None:
            st.warnings.append(f"worker {worker_id}: {spec['qualname']} not found in "
                               f"{spec['file']}; not profiled in this worker")
            continue
        owner, attr, raw = found
        _install(owner, attr, raw, spec["root"], st)
    os.makedirs(parts_dir, exist_ok=True)
    writer = _WorkerWriter(parts_dir, worker_id)
    writer.write()
    from multiprocessing import util

    util.Finalize(None, writer.write, kwargs={"final": True}, exitpriority=100)
    threading.Thread(target=writer.loop, name="stallscope-lineprof-flush", daemon=True).start()


# ---------------------------------------------------------------------------------------------
# The capture the runner drives.


class Capture:
    def __init__(self, target: str, depth: int, out_dir: str, emit: Callable[[dict], None]):
        self.target = target
        self.depth = int(depth)
        self.out_dir = os.path.abspath(out_dir)
        # The session folder or its lineprof/ folder: either way the files land in lineprof/.
        self.lineprof_dir = (self.out_dir if os.path.basename(self.out_dir) == "lineprof"
                             else os.path.join(self.out_dir, "lineprof"))
        self.emit = emit
        self.enabled = True
        self.warnings: list[str] = []
        self._seen_classes: set[int] = set()
        self._loaders: list[weakref.ref] = []
        self._explicit_done = False
        self._explicit_why: str | None = None
        self._main_pid = os.getpid()
        self._finished: tuple[str | None] | None = None
        self._rank: int | None = None

    @property
    def rank_part(self) -> str:
        """'.rank<N>' in a job of several ranks (torchrun, or ranks the script launched: a
        launching script becomes rank 0 only once it launches, and Lightning's teardown
        removes WORLD_SIZE again, so the first rank seen is kept), else ''."""
        if self._rank is None:
            self._rank = _rank_from_env(os.environ)
        return "" if self._rank is None else f".rank{self._rank}"

    @property
    def parts_dir(self) -> str:
        return os.path.join(self.lineprof_dir, PARTS_DIR + self.rank_part)

    # -- messages
    def warn(self, message: str) -> None:
        if message in self.warnings:
            return
        self.warnings.append(message)
        try:
            self.emit({"event": "warning", "source": "lineprof", "message": message})
        except Exception:  # noqa: BLE001 - the event file may be gone; the JSON keeps it
            pass

    # -- hooks
    def on_dataloader(self, loader) -> None:
        if not self.enabled:
            return
        try:
            self._on_dataloader(loader)
        except Exception as exc:  # noqa: BLE001 - never break the user's training loop
            self.warn(f"line profiling skipped for a DataLoader: {type(exc).__name__}: {exc}")

    def _on_dataloader(self, loader) -> None:
        _ = self.rank_part  # a DataLoader iterated: the ranks are launched by now
        if not any(ref() is loader for ref in self._loaders):
            self._loaders.append(weakref.ref(loader))
        if self.target == "auto":
            self._install_auto(getattr(loader, "dataset", None))
        else:
            self._install_explicit()
        if getattr(loader, "num_workers", 0) > 0 and _STATE.targets:
            self._wrap_worker_init(loader)

    def _install_auto(self, dataset) -> None:
        if dataset is None:
            return
        classes, warnings = _auto_classes(dataset)
        for w in warnings:
            self.warn(w)
        made: dict[type, _Target] = {}
        for klass, attr, _wraps in classes:
            if id(klass) in self._seen_classes:
                continue
            self._seen_classes.add(id(klass))
            raw = klass.__dict__[attr]
            target = _install_with_callees(klass, attr, raw, self.depth, _STATE, self.warn)
            if target is not None:
                made[klass] = target
            if "__getitems__" in klass.__dict__:  # torch fetches whole batches through it
                _install_with_callees(klass, "__getitems__", klass.__dict__["__getitems__"],
                                      self.depth, _STATE, self.warn)
        methods = {klass: attr for klass, attr, _ in classes}
        for klass, _attr, wraps in classes:
            if klass in made:
                made[klass].wraps = [f"{k.__qualname__}.{methods[k]}" for k in wraps]

    def _install_explicit(self) -> None:
        if self._explicit_done:
            return
        found, why = _resolve_explicit(self.target)
        if found is None:
            reason = why or ""
            # The script's own module is gone once it has ended: keep what was seen while it ran.
            if (self._explicit_why is None or "was not imported" not in reason
                    or "__main__" in reason):
                self._explicit_why = reason
            return
        self._explicit_done = True
        self._explicit_why = None
        owner, attr, raw = found
        _install_with_callees(owner, attr, raw, self.depth, _STATE, self.warn)

    def _wrap_worker_init(self, loader) -> None:
        current = loader.worker_init_fn
        specs = [t.spec() for t in _STATE.targets.values()]
        if isinstance(current, WorkerInit):
            current.specs = specs
            return
        loader.worker_init_fn = WorkerInit(self.parts_dir, specs, current)

    # -- the end
    def finish(self) -> str | None:
        if not self.enabled:
            return None
        if self._finished is not None:  # once: the worker parts are gone after the merge
            return self._finished[0]
        self._finished = (self._finish(),)
        return self._finished[0]

    def _finish(self) -> str | None:
        if self.target != "auto" and not self._explicit_done:
            self._install_explicit()  # classes defined late: one last look
            if not self._explicit_done:
                self.warn(self._explicit_why or f"--lineprof target {self.target} not found")
        self._stop_persistent_workers()
        parts = self._read_parts()
        unit, funcs = _snapshot(_STATE) if os.getpid() == self._main_pid else (1e-9, [])
        merged = _merge_parts([(unit, funcs, True)] + [(p["unit"], p["funcs"], False)
                                                       for p in parts])
        paths = []
        for key, entry in merged.items():
            target = _STATE.targets.get(key)
            if entry["calls"] == 0 and not entry["lines"] and target is not None and \
                    not target.root:
                continue  # a same-file helper that never ran: no file for it
            paths.append((entry.get("root", False), self._write_profile(entry)))
        self._cleanup_parts()
        roots = [p for is_root, p in paths if is_root] or [p for _, p in paths]
        if not roots and self.target == "auto" and not _STATE.targets and not self.warnings:
            self.warn("no Dataset found: no DataLoader was iterated, so --lineprof auto had no "
                      "__getitem__ to line-profile; name one with --lineprof "
                      "module:Class.__getitem__")
        return roots[0] if roots else None

    def _stop_persistent_workers(self) -> None:
        """Persistent workers live until their loader dies, which may be after us: stop them
        now (the script is over) so they run their exit hook and write their final stats."""
        for ref in self._loaders:
            loader = ref()
            it = getattr(loader, "_iterator", None) if loader is not None else None
            if it is not None and hasattr(it, "_shutdown_workers"):
                try:
                    it._shutdown_workers()
                except Exception:  # noqa: BLE001
                    pass

    def _read_parts(self) -> list[dict]:
        if not os.path.isdir(self.parts_dir):
            return []
        parts: list[dict] = []
        for _attempt in range(3):
            parts, alive = [], []
            for name in sorted(os.listdir(self.parts_dir)):
                if not name.endswith(".json"):
                    continue
                try:
                    with open(os.path.join(self.parts_dir, name), encoding="utf-8") as fh:
                        part = json.load(fh)
                except (OSError, ValueError):
                    continue
                parts.append(part)
                if not part.get("final") and _pid_alive(part.get("pid", -1)):
                    alive.append(part)
            if not alive:
                break
            time.sleep(FLUSH_INTERVAL_S * 1.5)  # let a live worker's flush thread catch up
        for part in parts:
            wid, pid = part.get("worker_id"), part.get("pid")
            n = sum(f.get("calls", 0) for f in part.get("funcs", []) if f.get("root"))
            for w in part.get("warnings", []):
                self.warn(w)
            if part.get("final"):
                continue
            if _pid_alive(pid):
                self.warn(f"DataLoader worker {wid} (pid {pid}) was still running at the end; "
                          f"its stats are from its last flush ({n} samples)")
            else:
                self.warn(f"DataLoader worker {wid} (pid {pid}) ended without writing its final "
                          f"stats (crashed or killed); kept its last flush ({n} samples) and the "
                          "other workers' stats")
        return parts

    def _write_profile(self, entry: dict) -> str:
        os.makedirs(self.lineprof_dir, exist_ok=True)
        src = _source_lines(entry["file"])
        unit = entry["unit"]
        lines = []
        for lineno in sorted(entry["lines"]):
            hits, t = entry["lines"][lineno]
            text = src[lineno - 1].rstrip("\r\n") if 0 < lineno <= len(src) else ""
            lines.append({"lineno": lineno, "hits": hits, "total_s": t * unit, "source": text})
        # Show the whole function, not only the lines that ran.
        first = entry["first_line"]
        body = _block_end(src, first)
        have = {ln["lineno"] for ln in lines}
        for lineno in range(first, body + 1):
            if lineno not in have and 0 < lineno <= len(src):
                lines.append({"lineno": lineno, "hits": 0, "total_s": 0.0,
                              "source": src[lineno - 1].rstrip("\r\n")})
        lines.sort(key=lambda ln: ln["lineno"])
        qual = entry["qualname"]
        profile = {
            "version": FORMAT_VERSION,
            "function": qual.rsplit(".", 1)[-1],
            "qualname": qual,
            "file": entry["file"],
            "first_line": first,
            "unit_s": unit,
            "total_s": sum(ln["total_s"] for ln in lines),
            "samples": entry["calls"],
            "workers": entry["workers"],
            "lines": lines,
            "warnings": list(self.warnings),
            "root": bool(entry.get("root")),
            "wraps": entry.get("wraps", []),
            "unprofiled": entry.get("unprofiled", []),
            "target": self.target,
            "created": time.time(),
        }
        stem = _safe_name(qual) + self.rank_part  # ranks never share a file
        if self.rank_part:
            profile["rank"] = int(self.rank_part[len(".rank"):])
        path = os.path.join(self.lineprof_dir, f"{stem}.json")
        n = 2
        while os.path.exists(path) and _json_key(path) != (entry["file"], qual):
            path = os.path.join(self.lineprof_dir, f"{stem}-{n}.json")
            n += 1
        _write_json(path, profile)
        return path

    def _cleanup_parts(self) -> None:
        if not os.path.isdir(self.parts_dir):
            return
        for name in os.listdir(self.parts_dir):
            try:
                os.remove(os.path.join(self.parts_dir, name))
            except OSError:
                pass
        try:
            os.rmdir(self.parts_dir)
        except OSError:
            pass


def _merge_parts(parts: list[tuple[float, list[dict], bool]]) -> dict:
    """Sum per-function stats over processes; times stay in the finest unit seen."""
    unit = min((u for u, funcs, _ in parts if funcs), default=1e-9)
    merged: dict[tuple[str, str], dict] = {}
    for part_unit, funcs, is_main in parts:
        scale = part_unit / unit
        for f in funcs:
            key = (f["file"], f["qualname"])
            e = merged.setdefault(key, {"file": f["file"], "qualname": f["qualname"],
                                        "first_line": f["first_line"], "calls": 0,
                                        "lines": {}, "unit": unit, "workers": 0,
                                        "root": f.get("root", False),
                                        "wraps": f.get("wraps", []), "unprofiled": []})
            e["root"] = e["root"] or f.get("root", False)
            e["unprofiled"] += [u for u in f.get("unprofiled", []) if u not in e["unprofiled"]]
            e["calls"] += f["calls"]
            if not is_main and f["calls"] > 0:
                e["workers"] += 1
            for lineno, hits, t in f["lines"]:
                h0, t0 = e["lines"].get(lineno, (0, 0.0))
                e["lines"][lineno] = (h0 + hits, t0 + t * scale)
    return merged


def _pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (OSError, ValueError, TypeError):
        return False
    try:  # a zombie child is dead for our purposes
        with open(f"/proc/{int(pid)}/stat", encoding="ascii") as fh:
            return fh.read().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def _source_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.readlines()
    except OSError:
        return []


def _block_end(src: list[str], first: int) -> int:
    """Last line of the def starting at `first` (decorators allowed), by indentation."""
    if not (0 < first <= len(src)):
        return first
    import inspect

    try:
        block = inspect.getblock(src[first - 1:])
    except Exception:  # noqa: BLE001 - tokenizer errors on odd source: show profiled lines only
        return first
    return first + len(block) - 1


def _rank_from_env(env) -> int | None:
    """This process's rank in a job of more than one (RANK, or LOCAL_RANK on one node)."""
    try:
        if int(env.get("WORLD_SIZE", "1")) <= 1:
            return None
        if "RANK" in env:
            return int(env["RANK"])
        if env.get("NODE_RANK", "0") == "0" and "LOCAL_RANK" in env:
            return int(env["LOCAL_RANK"])
    except ValueError:
        return None
    return None


def _safe_name(qualname: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in qualname)


def _json_key(path: str) -> tuple[str, str] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            obj = json.load(fh)
        return (obj.get("file"), obj.get("qualname"))
    except (OSError, ValueError):
        return None


class _Disabled:
    """What start() gives back when line_profiler is missing: every hook is a no-op."""

    enabled = False

    def on_dataloader(self, loader) -> None:
        pass

    def finish(self) -> None:
        return None


def start(target: str, depth: int, out_dir: str, emit: Callable[[dict], None]):
    """Get ready to line-profile; nothing is patched until a DataLoader is iterated."""
    try:
        import line_profiler  # noqa: F401
    except ImportError:
        emit({"event": "warning", "source": "lineprof", "code": "line_profiler_missing",
              "python": sys.executable,
              "install": shlex.join(install_command()),
              "message": f"line_profiler is not installed in {sys.executable}, so there is no "
                         f"line heatmap; install it with: {shlex.join(install_command())}"})
        return _Disabled()
    if target != "auto":
        try:
            parse_target(target)
        except ValueError as exc:
            emit({"event": "warning", "source": "lineprof", "message": str(exc)})
            return _Disabled()
    cap = Capture(target, depth, out_dir, emit)
    if target != "auto":
        cap._install_explicit()  # a module the runner already imported resolves right away
    return cap
