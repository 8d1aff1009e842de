"""A Python factory as a conversion source: "path/to/file.py:factory", where `factory()` (or a
module-level object) is a map-style Dataset; the file is imported once per process."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stallscope.core.lmdb.errors import SourceError, one_line
from stallscope.core.lmdb.format import MAX_SAMPLES


@dataclass
class FactorySource:
    spec: str
    dataset: Any  # the user's map-style dataset
    classes: list[str] = field(default_factory=list)
    kind: str = "factory"

    def __len__(self) -> int:
        return len(self.dataset)

    def fingerprint(self) -> str:
        path = Path(self.spec.rsplit(":", 1)[0])
        try:
            stamp = path.stat().st_size
        except OSError:
            stamp = -1
        return hashlib.sha1(f"{self.spec}\t{stamp}\t{len(self)}".encode()).hexdigest()

    def task(self, start: int, stop: int) -> list:
        return list(range(start, stop))

    def name_of(self, index: int) -> str:
        return f"{Path(self.spec).name}[{index}]"


def is_factory_spec(spec: str) -> bool:
    head, sep, tail = str(spec).rpartition(":")
    return bool(sep) and head.endswith(".py") and tail.isidentifier()


def open_factory(spec: str) -> FactorySource:
    """The dataset `file.py:name` makes (its `classes` kept when it has them)."""
    path, name = spec.rsplit(":", 1)
    full = str(Path(path).expanduser().resolve())
    dataset = load_factory(full, name)
    classes = getattr(dataset, "classes", None)
    classes = [str(c) for c in classes] if isinstance(classes, list | tuple) else []
    source = FactorySource(f"{full}:{name}", dataset, classes)
    _check_length(source)
    return source


def _check_length(source: FactorySource) -> int:
    """len() of a user's dataset, or one SourceError saying why it is not usable."""
    try:
        n = len(source.dataset)
    except Exception as exc:  # noqa: BLE001 - user code: negative, huge or failing __len__
        raise SourceError(f"{source.spec}: len() of the dataset failed: {one_line(exc)}") from exc
    if n > MAX_SAMPLES:
        raise SourceError(f"{source.spec}: the dataset says it has {n:,} samples; at most "
                          f"{MAX_SAMPLES:,} can be stored")  # fmt: skip
    return n


_FACTORIES: dict[str, object] = {}


def load_factory(path: str, name: str) -> Any:
    """The dataset `name` (called when it is a class or factory function) of the file at path,
    imported once per process; SourceError (one line) when it cannot be had."""
    key = f"{path}:{name}"
    if key in _FACTORIES:
        return _FACTORIES[key]
    if not Path(path).is_file():
        raise SourceError(f"{path}: no such file")
    mod_name = "stallscope_factory_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    folder = str(Path(path).parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # so the factory's own sibling imports work
    try:
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise ImportError("not a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - user code; report it in one line
        raise SourceError(f"{path}: importing it failed: {one_line(exc)}") from exc
    if not hasattr(module, name):
        raise SourceError(f"{path}: has no attribute {name!r}")
    obj = getattr(module, name)
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "__getitem__")):
        try:
            obj = obj()
        except Exception as exc:  # noqa: BLE001
            raise SourceError(f"{path}: {name}() failed: {one_line(exc)}") from exc
    if not (hasattr(obj, "__getitem__") and hasattr(obj, "__len__")):
        raise SourceError(
            f"{path}: {name} gave a {type(obj).__name__}, not a map-style dataset "
            "(needs __len__ and __getitem__)"
        )
    _FACTORIES[key] = obj
    return obj

