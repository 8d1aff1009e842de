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
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from stallscope.core.errors import StallscopeError

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
LEAF_KINDS = ("image", "tensor", "ndarray", "int", "float", "bool", "str")


class SourceError(StallscopeError):
    """A conversion source that cannot be opened."""


class SampleError(Exception):
    """One sample that cannot be read; the conversion skips it and lists the reason."""


# ----------------------------------------------------------------------------- preprocessing


@dataclass(frozen=True)
class Preprocess:
    """Fixed preprocessing of PIL images, done once at conversion.

    resize: None, an int (shorter side, aspect kept; torchvision `Resize(int)`) or (w, h).
    crop:   None or (w, h), centred (torchvision `CenterCrop`).
    rgb:    convert every image to 3-channel RGB (torchvision's default loader does).
    """

    resize: int | tuple[int, int] | None = None
    crop: tuple[int, int] | None = None
    rgb: bool = True

    def to_dict(self) -> dict:
        d = asdict(self)
        d["resize"] = list(self.resize) if isinstance(self.resize, tuple) else self.resize
        d["crop"] = list(self.crop) if self.crop else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Preprocess:
        resize = d.get("resize")
        crop = d.get("crop")
        return cls(
            resize=tuple(resize) if isinstance(resize, list) else resize,
            crop=tuple(crop) if crop else None,
            rgb=bool(d.get("rgb", True)),
        )

    def output_size(self, w: int, h: int) -> tuple[int, int]:
        if isinstance(self.resize, int):
            w, h = _short_side(w, h, self.resize)
        elif self.resize:
            w, h = self.resize
        if self.crop:
            w, h = self.crop
        return w, h

    def describe(self) -> str:
        parts = []
        if isinstance(self.resize, int):
            parts.append(f"resize shorter side to {self.resize}")
        elif self.resize:
            parts.append(f"resize to {self.resize[0]}x{self.resize[1]}")
        if self.crop:
            parts.append(f"centre crop {self.crop[0]}x{self.crop[1]}")
        parts.append("RGB" if self.rgb else "keep colour mode")
        return ", ".join(parts)


def parse_size(text: str, what: str = "size") -> int | tuple[int, int]:
    """'256' -> 256, '320x240' -> (320, 240)."""
    try:
        if "x" in text.lower():
            w, h = (int(v) for v in text.lower().split("x"))
            if w > 0 and h > 0:
                return (w, h)
        elif int(text) > 0:
            return int(text)
    except ValueError:
        pass
    raise StallscopeError(f"{what} {text!r}: expected N or WxH with positive integers")


def _short_side(w: int, h: int, size: int) -> tuple[int, int]:
    if w <= h:
        return size, int(size * h / w)
    return int(size * w / h), size


def preprocess_image(img: Image.Image, pre: Preprocess) -> Image.Image:
    if pre.rgb and img.mode != "RGB":
        img = img.convert("RGB")
    if pre.resize:
        size = _short_side(*img.size, pre.resize) if isinstance(pre.resize, int) else pre.resize
        if size != img.size:
            img = img.resize(size, Image.BILINEAR)
    if pre.crop:
        w, h = img.size
        cw, ch = pre.crop
        left, top = int(round((w - cw) / 2.0)), int(round((h - ch) / 2.0))
        img = img.crop((left, top, left + cw, top + ch))
    return img


def image_to_chw(img: Image.Image) -> tuple[str, np.ndarray]:
    """A PIL image -> (dtype, CHW array) in its own colour mode (palette and 1-bit widened).

    The array may be a transposed view of PIL's HWC bytes: whoever stores it makes the one
    contiguous copy (straight into the record)."""
    if img.mode == "1":
        img = img.convert("L")
    elif img.mode in ("P", "PA"):
        img = img.convert("RGBA" if "transparency" in img.info or img.mode == "PA" else "RGB")
    elif img.mode in ("CMYK", "YCbCr", "LAB", "HSV"):
        img = img.convert("RGB")
    w, h = img.size
    arr = np.asarray(img)  # L/RGB/RGBA -> uint8, I;16 -> uint16, I -> int32, F -> float32
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    chw = arr.reshape(h, w, -1).transpose(2, 0, 1)
    return arr.dtype.name, chw


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
    from stallscope.core.lmdb.format import DTYPE_CODE

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
        from stallscope.core.lmdb.format import plan

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
        from stallscope.core.lmdb.format import write

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


# ----------------------------------------------------------------------------- inspection


@dataclass
class SourceInfo:
    spec: str
    kind: str
    count: int
    classes: list[str]
    fields: list[str]
    field_info: list[str]  # "image: uint8 3x256x256" for the first readable sample
    structure: dict
    preview: list[tuple[str, np.ndarray]]  # (caption, HWC uint8 image) for thumbnails
    bytes_per_sample: float  # mean stored record size after preprocessing
    estimated_bytes: int  # on disk, with LMDB's page overhead
    notes: list[str]


def inspect_source(
    spec: str | os.PathLike, pre: Preprocess | None = None, n_preview: int = 6, n_size: int = 48
) -> SourceInfo:
    """Open a source, decode a few samples for a preview and estimate the converted size."""
    from stallscope.core.lmdb.format import record_size

    pre = pre or Preprocess()
    source = open_source(spec)
    n = len(source)
    if n == 0:
        raise SourceError(f"{source.spec}: the dataset is empty")
    decoder = Decoder(source_desc(source), pre.to_dict(), None)
    notes: list[str] = []
    preview: list = []
    structure, first = None, None
    sizes: list[int] = []
    candidates = dict.fromkeys(_spread(n, max(n_preview, 1)) + _spread(n, 3 * n_preview + 3))
    for index in candidates:  # spread over the classes; more tries if some are unreadable
        if len(preview) >= n_preview and structure is not None:
            break
        entry = source.task(index, index + 1)[0]
        try:
            _, st, leaves = decoder.sample(entry)
        except SampleError as exc:
            notes.append(f"{source.name_of(index)}: {exc}")
            continue
        if structure is None:
            structure = st if source.kind == "factory" else source.structure
            first = leaves
        sizes.append(record_size([(d, a.shape) for _k, d, a in leaves]))
        picture = next((to_display(a) for k, _d, a in leaves if to_display(a) is not None), None)
        if picture is not None and len(preview) < n_preview:
            caption = source.name_of(index)
            if isinstance(source, FolderSource) and source.labels is not None:
                caption = f"{source.classes[source.labels[index]]}/{Path(caption).name}"
            preview.append((index, caption, picture))
    if structure is None:
        raise SourceError(f"{source.spec}: none of the first samples could be read ({notes[0]})")
    if isinstance(source, FolderSource):
        sizes = _header_sizes(source, pre, n_size) or sizes
        if source.ignored_top_level:
            notes.append(
                f"{source.ignored_top_level} image(s) at the top level are ignored "
                "(ImageFolder layout: only class subfolders count)"
            )
    preview = [(caption, picture) for _i, caption, picture in sorted(preview, key=lambda p: p[0])]
    names = leaf_names(structure) if source.kind == "factory" else source.fields()
    info = [
        f"{name}: {kind} {d} {'x'.join(map(str, a.shape)) or 'scalar'}"
        for name, (kind, d, a) in zip(names, first, strict=False)
    ]
    mean = float(np.mean(sizes))
    return SourceInfo(
        source.spec, source.kind, n, list(source.classes), names, info, structure, preview,
        mean, int(n * lmdb_bytes(mean)), notes,
    )  # fmt: skip


def lmdb_bytes(record: float) -> float:
    """Bytes a value of this size takes in LMDB: big values live on whole 4 KiB overflow pages."""
    if record > 2000:
        return float(np.ceil((record + 16) / 4096) * 4096)
    return record * 1.4 + 24  # leaf pages are ~70% full after appends


def _spread(n: int, k: int) -> list[int]:
    return sorted(set(np.linspace(0, n - 1, num=min(k, n)).astype(int).tolist()))


def _header_sizes(source: FolderSource, pre: Preprocess, k: int) -> list[int]:
    """Record sizes from image headers only (no decoding), for a quick estimate."""
    from stallscope.core.lmdb.format import record_size

    out = []
    for index in _spread(len(source), k):
        try:
            with Image.open(source.root / source.files[index]) as img:
                w, h = pre.output_size(*img.size)
                bands = 3 if pre.rgb else len(img.getbands())
        except Exception:  # noqa: BLE001 - a corrupt file does not change the estimate
            continue
        leaves = [("uint8", (bands, h, w))]
        if source.labels is not None:
            leaves.append(("int64", ()))
        out.append(record_size(leaves))
    return out


def to_display(arr: np.ndarray) -> np.ndarray | None:
    """A CHW / HW array that looks like an image -> HWC uint8 for a thumbnail, else None."""
    if arr.ndim == 3 and arr.shape[0] in (1, 3, 4) and min(arr.shape[1:]) >= 8:
        hwc = arr.transpose(1, 2, 0)
    elif arr.ndim == 2 and min(arr.shape) >= 8:
        hwc = arr[:, :, None]
    else:
        return None
    if hwc.dtype != np.uint8:
        f = hwc.astype(np.float32)
        lo, hi = float(np.nanmin(f)), float(np.nanmax(f))
        hwc = ((f - lo) * (255.0 / (hi - lo if hi > lo else 1.0))).clip(0, 255).astype(np.uint8)
    if hwc.shape[2] == 1:
        hwc = np.repeat(hwc, 3, axis=2)
    return np.ascontiguousarray(hwc[:, :, :3])
