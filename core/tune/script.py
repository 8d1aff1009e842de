"""What the fix loop needs to know about the script behind a trace (no Qt here).

    info = script_of(trace_or_session_path)   # ScriptInfo from its session's run.json, or None
    dataset_factory("train.py", ["JpegFolder"]) -> "/abs/train.py:make_dataset" (or "")

A trace belongs to a session when it is the session folder itself or sits in its traces/
folder; the session's run.json says what was launched (script, args, cwd, interpreter) and,
once the run ended, the DataLoaders it built (with their Dataset's class name and file). A
session recorded on a host (run.json `remote`: host, remote session, interpreter as typed) names
the host's script and folder: `info.host` says so, and nothing of it is a path here.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from stallscope.core.capture import layout
from stallscope.core.capture.overrides import change_line
from stallscope.core.errors import StallscopeError
from stallscope.core.lmdb.snippet import factory_candidates
from stallscope.core.session.reader import is_session, open_session
from stallscope.core.session.steady import busiest_loader  # the one the tune and advice pick


@dataclass
class ScriptInfo:
    script: str
    args: list[str] = field(default_factory=list)
    cwd: str = ""
    python: str = ""
    session: str = ""
    datasets: list[str] = field(default_factory=list)  # the DataLoaders' Dataset class names
    files: list[str] = field(default_factory=list)     # the files that built the DataLoaders
    loader: dict = field(default_factory=dict)  # the DataLoader that served the most batches
    host: str = ""            # run.json remote.host: script and cwd are that host's paths
    remote_python: str = ""   # remote.python: the interpreter as the user typed it there
    remote_session: str = ""  # remote.session: the session folder on the host

    @property
    def is_remote(self) -> bool:
        return bool(self.host)

    @property
    def site(self) -> str:
        """The user's line that built it ("train.py:41"; for HF Trainer its trainer.train())."""
        return str(self.loader.get("site") or "")

    def change(self, changes: dict) -> str:
        """The line to edit for new settings, as tune says it (overrides.change_line): the
        user's DataLoader(...) line, or the framework setting (TrainingArguments(...))."""
        return change_line(self.loader, changes) if self.loader else ""


def session_folder(path: str | os.PathLike | None) -> Path | None:
    """The session a trace belongs to: the folder itself, the folder holding the trace, or the
    one above its traces/ folder."""
    if path is None:
        return None
    p = Path(path)
    candidates = [p] if p.is_dir() else [p.parent]
    if p.parent.name == layout.TRACES:
        candidates.append(p.parent.parent)
    return next((f for f in candidates if is_session(f)), None)


def script_of(path: str | os.PathLike | None) -> ScriptInfo | None:
    """The script a trace was recorded from (its session's run.json); None without one."""
    folder = session_folder(path)
    if folder is None:
        return None
    try:
        run = open_session(folder).run
    except StallscopeError:
        return None
    script = str(run.get("script") or "")
    if not script:
        return None
    loaders = [d for d in run.get("dataloaders") or [] if isinstance(d, dict)]
    args = run.get("args") or []
    remote = run.get("remote")
    remote = remote if isinstance(remote, dict) else {}
    host, python, session = (remote.get(k) for k in ("host", "python", "session"))
    return ScriptInfo(
        script=script, args=[str(a) for a in args] if isinstance(args, list) else [],
        cwd=str(run.get("cwd") or ""), python=str(run.get("python") or ""),
        session=str(folder),
        datasets=_unique(str(d["dataset"]) for d in loaders if d.get("dataset")),
        files=_unique(str(d["file"]) for d in loaders if d.get("file")),
        loader=busiest_loader(loaders), host=_text(host).strip(), remote_python=_text(python),
        remote_session=_text(session))


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# ----------------------------------------------------------------------------- the Dataset

def dataset_factory(script: str, datasets: list[str] | None = None,
                    files: list[str] | None = None) -> str:
    """The LMDB wizard's factory source (`file.py:name`) for the script's Dataset, or "".

    The Dataset is the class the script's DataLoaders were given (run.json), else a class
    whose base is a `...Dataset` in the script or in the modules it imports from its own folder.
    Its source is the class itself when it can be built without arguments, else a top-level
    function of that file that can and returns it; else the class anyway (the wizard says what
    it lacks). Without a Dataset class: a no-argument function of the script named for data
    (factory_candidates' order)."""
    script = str(Path(script).resolve())
    parsed = {script: _parse(script)} if Path(script).is_file() else {}
    local = _local_imports(script, parsed.get(script))
    for f in [*(files or []), *local]:
        if f and Path(f).is_file():
            parsed.setdefault(str(Path(f).resolve()), None)
    paths = list(parsed)
    for p in paths:
        parsed[p] = parsed[p] or _parse(p)
    own = [name for p in [script, *local] for name, node in _classes(parsed.get(p)).items()
           if any(_base_name(b).endswith("Dataset") for b in node.bases)]
    for name in _unique([*(datasets or []), *own]):
        for p in paths:
            node = _classes(parsed[p]).get(name)
            if node is None:
                continue
            if _no_args(_init(node)):
                return f"{p}:{name}"
            maker = next((f.name for f in _functions(parsed[p])
                          if _no_args(f) and not f.name.startswith("_") and _returns(f, name)),
                         None)
            return f"{p}:{maker or name}"
    if script not in parsed:
        return ""
    functions = {f.name for f in _functions(parsed[script])}
    data = [n for n in factory_candidates(script) if "data" in n.lower() and n in functions]
    return f"{script}:{data[0]}" if data else ""


def _local_imports(script: str, tree: ast.Module | None) -> list[str]:
    """The .py files beside the script that it imports (`from data import X`, `import data`,
    `from pkg.data import X`), in the order imported."""
    if tree is None:
        return []
    root = Path(script).parent
    names = [n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module
             and not n.level]
    names += [a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names]
    found = []
    for name in names:
        base = root.joinpath(*name.split("."))
        for f in (base.with_suffix(".py"), base / "__init__.py"):
            if f.is_file():
                found.append(str(f.resolve()))
                break
    return _unique(found)


def _parse(path: str) -> ast.Module | None:
    try:
        return ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None


def _classes(tree: ast.Module | None) -> dict[str, ast.ClassDef]:
    return {} if tree is None else {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _functions(tree: ast.Module | None) -> list[ast.FunctionDef]:
    return [] if tree is None else [n for n in tree.body if isinstance(n, ast.FunctionDef)]


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _init(node: ast.ClassDef) -> ast.FunctionDef | None:
    return next((n for n in node.body if isinstance(n, ast.FunctionDef)
                 and n.name == "__init__"), None)


def _no_args(fn: ast.FunctionDef | None) -> bool:
    """Callable without arguments (an __init__: besides self); no __init__ counts as such."""
    if fn is None:
        return True
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    if fn.name == "__init__":
        positional = positional[1:]
    required_kw = [k for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
    return len(positional) <= len(a.defaults) and not required_kw


def _returns(fn: ast.FunctionDef, name: str) -> bool:
    """The function returns `name(...)` somewhere in its body."""
    return any(isinstance(n, ast.Return) and isinstance(n.value, ast.Call)
               and _base_name(n.value.func) == name for n in ast.walk(fn))
