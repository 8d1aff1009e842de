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
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from stallscope.core.errors import StallscopeError
from stallscope.core.lmdb.format import DTYPE_CODE, MAX_SAMPLES, plan, write
from stallscope.core.lmdb.images import Preprocess, image_to_chw, preprocess_image

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


class SourceError(StallscopeError):
    """A conversion source that cannot be opened."""


class SampleError(Exception):
    """One sample that cannot be read; the conversion skips it and lists the reason."""


class SampleExit(StallscopeError):
    """A sample whose __getitem__ tried to end the process: the conversion stops there."""


def load_image(path: str, pre: Preprocess) -> tuple[str, np.ndarray]:
    try:
        with Image.open(path) as img:  # decoded by the array conversion, inside this try
            return image_to_chw(preprocess_image(img, pre))
    except Exception as exc:  # noqa: BLE001 - any decoder failure is a skipped sample
        text = one_line(exc).replace(repr(path), "").replace(f"'{path}'", "").replace(path, "")
        raise SampleError(text.rstrip()) from exc


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "no message"
    return f"{type(exc).__name__}: {text}"[:300]


# ----------------------------------------------------------------------------- flattening


MAX_DEPTH = 32  # nesting of tuples/lists/dicts in one sample


def flatten(item, pre: Preprocess, reference: dict | None = None):
    """A sample -> (structure, leaves [(kind, dtype, array)]). Raises SampleError.

    Float tensors and arrays whose values all lie on k/255 steps (a ToTensor() image) are stored
    as uint8 k, their leaf marked {"quant": original dtype}; with a reference structure (the
    one the conversion settled on) each leaf follows it: quantized where the reference is, a
    sample that is not on those steps is refused (SampleError) rather than rounded."""
    leaves: list[tuple[str, str, np.ndarray]] = []
    structure = _flatten(item, pre, leaves, "sample", reference, 0)
    return structure, leaves


def _flatten(obj, pre, leaves, where, ref, depth) -> dict:
    if depth > MAX_DEPTH:
        raise SampleError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(obj, tuple | list):
        kind = "tuple" if isinstance(obj, tuple) else "list"
        subs = _ref_items(ref, kind, len(obj))
        items = [_flatten(v, pre, leaves, f"{where}[{i}]", subs[i], depth + 1)
                 for i, v in enumerate(obj)]  # fmt: skip
        return {"type": kind, "items": items}
    if isinstance(obj, dict):
        keys = list(obj)
        if not all(isinstance(k, str) for k in keys):
            raise SampleError(f"{where}: dict keys must be str, got {_short(keys)}")
        subs = _ref_items(ref, "dict", len(keys))
        items = [_flatten(obj[k], pre, leaves, f"{where}[{_short(k)}]", subs[i], depth + 1)
                 for i, k in enumerate(keys)]  # fmt: skip
        return {"type": "dict", "keys": keys, "items": items}
    kind, dtype, arr = _leaf(obj, pre, where)
    leaf = {"type": "leaf", "kind": kind}
    if kind in ("tensor", "ndarray") and dtype in ("float16", "float32", "float64"):
        dtype, arr, mark = _store_float(arr, pre, where, ref)
        leaf.update(mark)
    leaves.append((kind, dtype, arr))
    return leaf


def _ref_items(ref: dict | None, kind: str, n: int) -> list:
    if ref is not None and ref.get("type") == kind and len(ref.get("items", ())) == n:
        return ref["items"]
    return [None] * n


def _short(obj) -> str:
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."


def on_255_steps(arr: np.ndarray) -> np.ndarray | None:
    """uint8 k when every value is exactly k/255 as float division gives it, else None."""
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.rint(arr.astype(np.float64) * 255.0)
        if arr.size and not (scaled.min() >= 0 and scaled.max() <= 255):
            return None
        q = scaled.astype(np.uint8)
        back = q.astype(arr.dtype) / arr.dtype.type(255)
    return q if back.tobytes() == arr.tobytes() else None


def _store_float(arr: np.ndarray, pre: Preprocess, where: str, ref: dict | None):
    """(stored dtype, array, leaf marks) for a float leaf, by pre.floats and the reference."""
    name = arr.dtype.name
    if pre.floats == "float16":
        return "float16", arr.astype(np.float16), {"cast": name}
    if pre.floats == "float32" or (ref is not None and "quant" not in ref):
        return name, arr, {}
    q = on_255_steps(arr)
    if q is None:
        if ref is not None:
            raise SampleError(
                f"{where}: values are not on 1/255 steps like the first samples' (stored "
                "as uint8); convert with --floats float32 to keep every float"
            )
        return name, arr, {}
    return "uint8", q, {"quant": name}


def _leaf(obj, pre, where) -> tuple[str, str, np.ndarray]:
    if isinstance(obj, Image.Image):
        dtype, arr = image_to_chw(preprocess_image(obj, pre))
        return "image", dtype, arr
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return "tensor", "bfloat16", t.view(torch.int16).numpy().view(np.uint16)
        try:
            arr = t.numpy()
        except (TypeError, RuntimeError) as exc:
            raise SampleError(f"{where}: a {t.dtype} tensor cannot be stored ({exc})") from exc
        return "tensor", _dtype_name(arr, where), arr
    if isinstance(obj, bool | np.bool_):
        return "bool", "bool", np.asarray(obj, dtype=np.bool_)
    if isinstance(obj, int | np.integer):
        try:
            arr = np.asarray(obj, dtype=obj.dtype if isinstance(obj, np.integer) else np.int64)
        except OverflowError as exc:
            raise SampleError(f"{where}: the int {_short(obj)} does not fit in 64 bits") from exc
        return "int", _dtype_name(arr, where), arr
    if isinstance(obj, float | np.floating):
        arr = np.asarray(obj, dtype=obj.dtype if isinstance(obj, np.floating) else np.float64)
        return "float", _dtype_name(arr, where), arr
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise SampleError(f"{where}: an array of Python objects cannot be stored")
        arr = np.ascontiguousarray(obj)
        return "ndarray", _dtype_name(arr, where), arr
    if isinstance(obj, str):
        # surrogatepass: a lone surrogate (an undecodable file name) round-trips exactly
        return "str", "uint8", np.frombuffer(obj.encode("utf-8", "surrogatepass"), np.uint8)
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
    sizes: np.ndarray | None = None  # st_size per file, from the one scan
    mtimes: np.ndarray | None = None  # st_mtime_ns per file
    scan_skipped: list[dict] = field(default_factory=list)  # {"path", "reason"}: not samples
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
        """Names and sizes as the scan saw them (no second stat of every file)."""
        h = hashlib.sha1(b"\0".join(os.fsencode(f) for f in self.files))
        if self.sizes is not None:
            h.update(np.ascontiguousarray(self.sizes, "<i8").tobytes())
        return h.hexdigest()

    def listing(self) -> tuple:
        n = len(self.files)
        labels = self.labels if self.labels is not None else np.full(n, -1, np.int64)
        zeros = np.zeros(n, np.int64)
        return (self.files, labels, zeros if self.sizes is None else self.sizes,
                zeros if self.mtimes is None else self.mtimes)  # fmt: skip

    def changed(self, index: int) -> str:
        """Why file `index` is not what the scan saw ('' when it is the same)."""
        try:
            st = os.stat(self.root / self.files[index])
        except OSError as exc:
            return f"cannot be read now ({one_line(exc)})"
        if self.sizes is not None and st.st_size != self.sizes[index]:
            return f"is {st.st_size} bytes now, {int(self.sizes[index])} when converted"
        if self.mtimes is not None and self.mtimes[index] and st.st_mtime_ns != self.mtimes[index]:
            return "was modified after it was converted"
        return ""

    def task(self, start: int, stop: int) -> list:
        labels = self.labels
        return [
            (i, str(self.root / self.files[i]), -1 if labels is None else int(labels[i]))
            for i in range(start, stop)
        ]

    def name_of(self, index: int) -> str:
        return self.files[index]


def folder_from_listing(root: str, classes: list[str], listing) -> FolderSource:
    """The source a conversion scanned, rebuilt from the listing stored in its LMDB."""
    files, labels, sizes, mtimes = listing
    flat = len(labels) > 0 and bool(np.all(labels < 0)) and not classes
    return FolderSource(Path(root), files, None if flat else labels, list(classes),
                        sizes=sizes, mtimes=mtimes)  # fmt: skip


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


Source = FolderSource | FactorySource


def is_factory_spec(spec: str) -> bool:
    head, sep, tail = str(spec).rpartition(":")
    return bool(sep) and head.endswith(".py") and tail.isidentifier()


def open_source(spec: str | os.PathLike) -> Source:
    from stallscope.core.jobs import run_job

    return run_job(open_source_job(spec))


def open_source_job(spec: str | os.PathLike):
    """open_source as a job: a folder's scan yields (files found, 0) as it goes."""
    spec = str(spec)
    if is_factory_spec(spec):
        path, name = spec.rsplit(":", 1)
        full = str(Path(path).expanduser().resolve())
        dataset = load_factory(full, name)
        classes = getattr(dataset, "classes", None)
        classes = [str(c) for c in classes] if isinstance(classes, list | tuple) else []
        source = FactorySource(f"{full}:{name}", dataset, classes)
        factory_length(source)
        return source
    return (yield from scan_folder_job(Path(spec).expanduser()))


def factory_length(source: FactorySource) -> int:
    """len() of a user's dataset, or one SourceError saying why it is not usable."""
    try:
        n = len(source.dataset)
    except Exception as exc:  # noqa: BLE001 - user code: negative, huge or failing __len__
        raise SourceError(f"{source.spec}: len() of the dataset failed: {one_line(exc)}") from exc
    if n > MAX_SAMPLES:
        raise SourceError(f"{source.spec}: the dataset says it has {n:,} samples; at most "
                          f"{MAX_SAMPLES:,} can be stored")  # fmt: skip
    return n


def scan_folder(root: Path) -> FolderSource:
    from stallscope.core.jobs import run_job

    return run_job(scan_folder_job(root))


def scan_folder_job(root: Path):
    """Walk an image folder once (one stat per image file, for its size and mtime), in
    torchvision ImageFolder's order. Directory symlinks are followed once: a directory already
    listed (same st_dev, st_ino: a loop, or a second link to it) is skipped and listed, as is
    anything with an image name that is not a regular file (a FIFO would block the decoder)."""
    if not root.exists():
        raise SourceError(f"{root}: no such folder")
    if not root.is_dir():
        raise SourceError(f"{root}: not a folder (give an image folder or file.py:factory)")
    root = root.resolve()
    scan = _Scan(root)
    try:
        top = sorted((e for e in os.scandir(root) if not e.name.startswith(".")),
                     key=lambda e: e.name)  # fmt: skip
    except OSError as exc:
        raise SourceError(f"{root}: cannot be listed ({one_line(exc)})") from exc
    scan.visit_dir(os.stat(root), "")
    class_dirs = [e.name for e in top if _entry_is_dir(e)]
    top_images = [e for e in top if not _entry_is_dir(e) and _is_image(e.name)]
    if class_dirs:
        for label, name in enumerate(class_dirs):
            yield from scan.walk(name, label)
        if scan.files:
            return scan.source(class_dirs, len(top_images))
    scan = _Scan(root)
    for entry in top_images:
        scan.add_file(entry.path, entry.name, -1)
    if not scan.files:
        raise SourceError(f"{root}: no image files ({', '.join(IMG_EXTENSIONS)}) found")
    return scan.source([], 0)


def _entry_is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


class _Scan:
    """What one scan found: files with label, size and mtime, and what it skipped."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: list[str] = []
        self.labels: list[int] = []
        self.sizes: list[int] = []
        self.mtimes: list[int] = []
        self.skipped: list[dict] = []
        self.visited: dict[tuple[int, int], str] = {}

    def visit_dir(self, st: os.stat_result, rel: str) -> bool:
        key = (st.st_dev, st.st_ino)
        if key in self.visited:
            first = self.visited[key] or "the source folder"
            self.skipped.append({"path": rel, "reason": f"directory already listed as {first} "
                                 "(a symlink loop or a second link)"})  # fmt: skip
            return False
        self.visited[key] = rel
        return True

    def walk(self, top: str, label: int):
        """Files under root/top in sorted(os.walk()) order; yields (files found, 0)."""
        by_dir: dict[str, list[os.DirEntry]] = {}
        stack = [top]
        while stack:
            rel = stack.pop()
            try:
                if not self.visit_dir(os.stat(self.root / rel), rel):
                    continue
                entries = list(os.scandir(self.root / rel))
            except OSError as exc:
                self.skipped.append({"path": rel, "reason": f"cannot be listed: {one_line(exc)}"})
                continue
            images, subdirs = [], []
            for entry in entries:
                if _entry_is_dir(entry):
                    subdirs.append(f"{rel}/{entry.name}")
                elif _is_image(entry.name):
                    images.append(entry)
            by_dir[rel] = images
            stack += sorted(subdirs, reverse=True)
        reported = len(self.files)
        for rel in sorted(by_dir):
            for entry in sorted(by_dir[rel], key=lambda e: e.name):
                self.add_file(entry.path, f"{rel}/{entry.name}", label)
            if len(self.files) - reported >= 2000:
                reported = len(self.files)
                yield reported, 0

    def add_file(self, path: str, rel: str, label: int) -> None:
        try:
            st = os.stat(path)
        except OSError as exc:
            self.skipped.append({"path": rel, "reason": f"cannot be read: {one_line(exc)}"})
            return
        if not stat.S_ISREG(st.st_mode):
            self.skipped.append({"path": rel, "reason": f"not a regular file ({_kind(st)})"})
            return
        self.files.append(rel)
        self.labels.append(label)
        self.sizes.append(st.st_size)
        self.mtimes.append(st.st_mtime_ns)

    def source(self, classes: list[str], ignored_top_level: int) -> FolderSource:
        labels = np.asarray(self.labels, np.int64) if classes else None
        return FolderSource(
            self.root, self.files, labels, classes, ignored_top_level,
            np.asarray(self.sizes, np.int64), np.asarray(self.mtimes, np.int64), self.skipped,
        )  # fmt: skip


def _kind(st: os.stat_result) -> str:
    mode = st.st_mode
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a directory")):  # fmt: skip
        if test(mode):
            return name
    return "not a plain file"


def _is_image(name: str) -> bool:
    return name.lower().endswith(IMG_EXTENSIONS)


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


# ----------------------------------------------------------------------------- decoding


class Decoder:
    """Turns a task (see Source.task) into records; one per worker process."""

    def __init__(self, source_desc: dict, preprocess: dict, structure: dict | None) -> None:
        self.kind = source_desc["kind"]
        self.pre = Preprocess.from_dict(preprocess)
        self.structure = structure
        self.dataset: Any = None
        self.name = Path(source_desc["spec"]).name
        if self.kind == "factory":
            path, name = source_desc["spec"].rsplit(":", 1)
            self.dataset = load_factory(path, name)

    def sample(self, entry) -> tuple[int, dict | None, list[tuple[str, str, np.ndarray]]]:
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
        except SystemExit as exc:
            raise SampleExit(f"sample {index} ({self.name}[{index}]) called sys.exit({exc.code!r})"
                             " in __getitem__; the samples before it are kept") from exc
        except Exception as exc:  # noqa: BLE001 - the user's __getitem__ failed for this one
            raise SampleError(one_line(exc)) from exc
        try:
            structure, leaves = flatten(item, self.pre, self.structure)
        except RecursionError as exc:
            raise SampleError("nested too deeply to store") from exc
        if self.structure is not None and structure != self.structure:
            raise SampleError(f"structure {describe(structure)} differs from sample 0's")
        return index, structure, leaves

    def decode(self, task: list, current=None, w: int = 0) -> list[tuple[int, tuple | None, str]]:
        """-> [(source index, (header, offsets, size, arrays) or None, reason)]. `current[w]`
        (shared memory) names the sample being decoded, for when a __getitem__ kills its
        process."""

        out: list[tuple[int, tuple | None, str]] = []
        for entry in task:
            index = entry if self.kind == "factory" else entry[0]
            if current is not None:
                current[w] = index
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
