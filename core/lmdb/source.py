"""What an LMDB conversion reads: an image folder or a Python factory, decoded to flat arrays.

A source is opened from a spec string:
    "path/to/folder"            ImageFolder layout (class subfolders become labels), or flat
    "path/to/file.py:factory"   `factory()` (or a module-level object) is a map-style Dataset whose
                                items are tensors / arrays / PIL images / numbers / str, or
                                (nested) tuples, lists and dicts of them

Each sample is flattened into leaves (kind, dtype, C-order array); the structure that puts them
back together is JSON, stored once in the LMDB's metadata. PIL images become CHW uint8 arrays,
after the optional fixed preprocessing (resize, centre crop, RGB). Needs no torch unless the
factory's items hold tensors.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from stallscope.core.errors import StallscopeError
from stallscope.core.lmdb.format import DTYPE_CODE, plan, write
from stallscope.core.lmdb.images import Preprocess, image_to_chw, preprocess_image

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


class SourceError(StallscopeError):
    """A conversion source that cannot be opened."""


class SampleError(Exception):
    """One sample that cannot be read; the conversion skips it and lists the reason."""


def load_image(path: str, pre: Preprocess) -> tuple[str, np.ndarray]:
    try:
        with Image.open(path) as img:
            img.load()
            return image_to_chw(preprocess_image(img, pre))
    except Exception as exc:  # noqa: BLE001 - any decoder failure is a skipped sample
        raise SampleError(one_line(exc).replace(f"'{path}'", "").replace(path, "")) from exc


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "no message"
    return f"{type(exc).__name__}: {text}"[:300]


# ----------------------------------------------------------------------------- flattening


def flatten(item, pre: Preprocess) -> tuple[dict, list[tuple[str, str, np.ndarray]]]:
    """A sample -> (structure, leaves [(kind, dtype, array)]). Raises SampleError."""
    leaves: list[tuple[str, str, np.ndarray]] = []
    structure = _flatten(item, pre, leaves, "sample")
    return structure, leaves


def _flatten(obj, pre, leaves, where) -> dict:
    if isinstance(obj, tuple | list):
        items = [_flatten(v, pre, leaves, f"{where}[{i}]") for i, v in enumerate(obj)]
        return {"type": "tuple" if isinstance(obj, tuple) else "list", "items": items}
    if isinstance(obj, dict):
        keys = list(obj)
        if not all(isinstance(k, str) for k in keys):
            raise SampleError(f"{where}: dict keys must be str, got {keys!r}")
        items = [_flatten(obj[k], pre, leaves, f"{where}[{k!r}]") for k in keys]
        return {"type": "dict", "keys": keys, "items": items}
    kind, dtype, arr = _leaf(obj, pre, where)
    leaves.append((kind, dtype, arr))
    return {"type": "leaf", "kind": kind}


def _leaf(obj, pre, where) -> tuple[str, str, np.ndarray]:
    if isinstance(obj, Image.Image):
        dtype, arr = image_to_chw(preprocess_image(obj, pre))
        return "image", dtype, arr
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return "tensor", "bfloat16", t.view(torch.int16).numpy().view(np.uint16)
        arr = t.numpy()
        return "tensor", _dtype_name(arr, where), arr
    if isinstance(obj, bool | np.bool_):
        return "bool", "bool", np.asarray(obj, dtype=np.bool_)
    if isinstance(obj, int | np.integer):
        arr = np.asarray(obj, dtype=obj.dtype if isinstance(obj, np.integer) else np.int64)
        return "int", _dtype_name(arr, where), arr
    if isinstance(obj, float | np.floating):
        arr = np.asarray(obj, dtype=obj.dtype if isinstance(obj, np.floating) else np.float64)
        return "float", _dtype_name(arr, where), arr
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        return "ndarray", _dtype_name(arr, where), arr
    if isinstance(obj, str):
        return "str", "uint8", np.frombuffer(obj.encode(), np.uint8)
    raise SampleError(
        f"{where} is a {type(obj).__name__}; only tensors, arrays, PIL images, numbers and str "
        "(or tuples/lists/dicts of them) can be stored"
    )


def _dtype_name(arr: np.ndarray, where: str) -> str:

    name = arr.dtype.name
    if name not in DTYPE_CODE or arr.dtype.byteorder == ">":
        raise SampleError(f"{where} has dtype {arr.dtype}, which cannot be stored")
    return name


def leaf_names(structure: dict, prefix: str = "") -> list[str]:
    """Field names of the leaves in order: 'image', '0', 'lr', '1.depth', ..."""
    if structure["type"] == "leaf":
        return [prefix or "value"]
    keys = structure.get("keys") or [str(i) for i in range(len(structure["items"]))]
    names = []
    for key, sub in zip(keys, structure["items"], strict=True):
        names += leaf_names(sub, f"{prefix}.{key}" if prefix else key)
    return names


# ----------------------------------------------------------------------------- sources


@dataclass
class FolderSource:
    root: Path
    files: list[str]  # paths relative to root, sample order
    labels: np.ndarray | None  # int64 per file, None for a flat folder
    classes: list[str]
    ignored_top_level: int = 0
    kind: str = "folder"

    @property
    def spec(self) -> str:
        return str(self.root)

    def __len__(self) -> int:
        return len(self.files)

    @property
    def structure(self) -> dict:
        image = {"type": "leaf", "kind": "image"}
        if self.labels is None:
            return image
        return {"type": "tuple", "items": [image, {"type": "leaf", "kind": "int"}]}

    def fields(self) -> list[str]:
        return ["image", "label"] if self.labels is not None else ["image"]

    def fingerprint(self) -> str:
        h = hashlib.sha1()
        for rel in self.files:
            try:
                size = os.stat(self.root / rel).st_size
            except OSError:
                size = -1
            h.update(f"{rel}\t{size}\n".encode())
        return h.hexdigest()

    def task(self, start: int, stop: int) -> list:
        labels = self.labels
        return [
            (i, str(self.root / self.files[i]), -1 if labels is None else int(labels[i]))
            for i in range(start, stop)
        ]

    def name_of(self, index: int) -> str:
        return self.files[index]


@dataclass
class FactorySource:
    spec: str
    dataset: object
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


Source = FolderSource | FactorySource


def is_factory_spec(spec: str) -> bool:
    head, sep, tail = str(spec).rpartition(":")
    return bool(sep) and head.endswith(".py") and tail.isidentifier()


def open_source(spec: str | os.PathLike) -> Source:
    spec = str(spec)
    if is_factory_spec(spec):
        path, name = spec.rsplit(":", 1)
        full = str(Path(path).expanduser().resolve())
        dataset = load_factory(full, name)
        classes = getattr(dataset, "classes", None)
        classes = [str(c) for c in classes] if isinstance(classes, list | tuple) else []
        return FactorySource(f"{full}:{name}", dataset, classes)
    return scan_folder(Path(spec).expanduser())


def scan_folder(root: Path) -> FolderSource:
    if not root.exists():
        raise SourceError(f"{root}: no such folder")
    if not root.is_dir():
        raise SourceError(f"{root}: not a folder (give an image folder or file.py:factory)")
    root = root.resolve()
    top = sorted((e for e in os.scandir(root) if not e.name.startswith(".")), key=lambda e: e.name)
    class_dirs = [e.name for e in top if e.is_dir()]
    top_images = [e.name for e in top if e.is_file() and _is_image(e.name)]
    if class_dirs:
        files: list[str] = []
        labels: list[int] = []
        for label, name in enumerate(class_dirs):
            found = _images_under(root / name)
            files += [f"{name}/{rel}" for rel in found]
            labels += [label] * len(found)
        if files:
            return FolderSource(
                root, files, np.asarray(labels, np.int64), class_dirs, len(top_images)
            )
    if not top_images:
        raise SourceError(f"{root}: no image files ({', '.join(IMG_EXTENSIONS)}) found")
    return FolderSource(root, top_images, None, [])


def _is_image(name: str) -> bool:
    return name.lower().endswith(IMG_EXTENSIONS)


def _images_under(folder: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        dirnames.sort()
        rel = os.path.relpath(dirpath, folder)
        for name in sorted(filenames):
            if _is_image(name):
                out.append(name if rel == "." else f"{rel}/{name}".replace(os.sep, "/"))
    return out


_FACTORIES: dict[str, object] = {}


def load_factory(path: str, name: str):
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


# ----------------------------------------------------------------------------- decoding


class Decoder:
    """Turns a task (see Source.task) into records; one per worker process."""

    def __init__(self, source_desc: dict, preprocess: dict, structure: dict | None) -> None:
        self.kind = source_desc["kind"]
        self.pre = Preprocess.from_dict(preprocess)
        self.structure = structure
        self.dataset = None
        if self.kind == "factory":
            path, name = source_desc["spec"].rsplit(":", 1)
            self.dataset = load_factory(path, name)

    def sample(self, entry) -> tuple[int, dict, list[tuple[str, str, np.ndarray]]]:
        """-> (source index, structure, leaves). Raises SampleError."""
        if self.kind == "folder":
            index, path, label = entry
            dtype, arr = load_image(path, self.pre)
            leaves = [("image", dtype, arr)]
            if label >= 0:
                leaves.append(("int", "int64", np.asarray(label, np.int64)))
            return index, self.structure, leaves
        index = entry
        try:
            item = self.dataset[index]
        except Exception as exc:  # noqa: BLE001 - the user's __getitem__ failed for this one
            raise SampleError(one_line(exc)) from exc
        structure, leaves = flatten(item, self.pre)
        if self.structure is not None and structure != self.structure:
            raise SampleError(f"structure {describe(structure)} differs from sample 0's")
        return index, structure, leaves

    def decode(self, task: list) -> list[tuple[int, tuple | None, str]]:
        """-> [(source index, (header, offsets, size, arrays) or None, reason)]."""

        out = []
        for entry in task:
            index = entry if self.kind == "factory" else entry[0]
            try:
                _, _, leaves = self.sample(entry)
            except SampleError as exc:
                out.append((index, None, str(exc)))
                continue
            header, offsets, size = plan(index, [(d, a.shape) for _k, d, a in leaves])
            out.append((index, (header, offsets, size, [a for _k, _d, a in leaves]), ""))
        return out

    def records(self, task: list) -> list[tuple[int, bytearray | None, str]]:
        """-> [(source index, record or None, reason)]."""

        out = []
        for index, planned, reason in self.decode(task):
            record = None
            if planned is not None:
                header, offsets, size, arrays = planned
                record = bytearray(size)
                write(memoryview(record), 0, header, offsets, arrays)
            out.append((index, record, reason))
        return out


def describe(structure: dict) -> str:
    if structure["type"] == "leaf":
        return structure["kind"]
    inner = ", ".join(describe(s) for s in structure["items"])
    if structure["type"] == "dict":
        pairs = zip(structure["keys"], structure["items"], strict=True)
        inner = ", ".join(f"{k}: {describe(s)}" for k, s in pairs)
        return "{" + inner + "}"
    return f"({inner})" if structure["type"] == "tuple" else f"[{inner}]"


def source_desc(source: Source) -> dict:
    return {"kind": source.kind, "spec": source.spec}
