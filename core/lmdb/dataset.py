"""LMDBDataset: read a stallscope LMDB back, fast, from any number of DataLoader workers.

    from stallscope.core.lmdb.dataset import LMDBDataset
    ds = LMDBDataset("data/train.lmdb")        # image folder: (uint8 CHW tensor, label)
    loader = DataLoader(ds, batch_size=256, shuffle=True, num_workers=8)

The environment opens lazily in each process (the pid is checked on every access), so the
dataset pickles without it and is safe under fork and spawn. It opens readonly with lock=False.
Each field is viewed in place with np.frombuffer, then copied once into memory the sample owns:
the LMDB map is read-only memory, so a view handed out could not survive an in-place transform.
torch is imported on first item access, not on import.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import lmdb
import numpy as np

from stallscope.core.errors import StallscopeError
from stallscope.core.lmdb import format as fmt


class LMDBDataset:
    """A map-style Dataset over a stallscope LMDB.

    transform: for image-folder conversions it is applied to the image tensor (like torchvision's
    ImageFolder); for factory conversions it receives the whole rebuilt sample.
    Image fields come back as uint8 CHW tensors, tensor fields as tensors of their own dtype and
    shape, ndarray fields as numpy arrays, numbers as Python numbers, str as str.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        transform: Callable | None = None,
        readahead: bool = False,
        allow_partial: bool = False,
    ) -> None:
        self.path = str(Path(path).expanduser())
        self.transform = transform
        self.readahead = readahead
        meta, progress = read_meta(self.path)
        if not meta.get("complete"):
            if not allow_partial:
                raise StallscopeError(
                    f"{self.path}: unfinished conversion ({progress.get('written', 0)} of "
                    f"{meta['source']['count']} samples); resume it with "
                    f"`stallscope-cli convert {meta['source']['spec']} {self.path}`"
                )
            self._count = int(progress.get("written", 0))
        else:
            self._count = int(meta["count"])
        self.meta = meta
        self.classes: list[str] = list(meta.get("classes", []))
        self.fields: list[str] = list(meta.get("fields", []))
        self.structure: dict = meta["structure"]
        self._kinds = _leaf_kinds(self.structure)
        self._folder = meta["source"]["kind"] == "folder"
        self._pid: int | None = None
        self._env = None
        self._txn = None

    def __len__(self) -> int:
        return self._count

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.update(_env=None, _txn=None, _pid=None)
        return state

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit module globals may be gone
            pass

    def close(self) -> None:
        if getattr(self, "_pid", None) == os.getpid():
            _release(self.path)
        self._env = self._txn = self._pid = None

    def _open(self):
        if self._pid != os.getpid():  # first use in this process (a fresh or forked worker)
            self._env, self._txn = _acquire(self.path, self.readahead)
            self._pid = os.getpid()
        return self._txn

    @property
    def env(self) -> lmdb.Environment:
        self._open()
        return self._env

    def _record(self, index: int):
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(f"index {index} out of range for {self._count} samples")
        buf = self._open().get(fmt.sample_key(index))
        if buf is None:
            raise StallscopeError(f"{self.path}: sample {index} is missing")
        return buf

    def arrays(self, index: int) -> tuple[int, list[np.ndarray]]:
        """(source index, one owned numpy array per field); needs no torch."""
        buf = self._record(index)
        source_index, views = fmt.parse(buf)
        return source_index, [np.array(fmt.view_array(buf, v)) for v in views]

    def source_index(self, index: int) -> int:
        return fmt.parse(self._record(index))[0]

    def __getitem__(self, index: int):
        import torch

        buf = self._record(index)
        _, views = fmt.parse(buf)
        values = []
        for kind, view in zip(self._kinds, views, strict=True):
            arr = fmt.view_array(buf, view)
            if kind in ("image", "tensor"):
                t = torch.from_numpy(np.array(arr))  # the one copy, into owned memory
                values.append(t.view(torch.bfloat16) if view.dtype == "bfloat16" else t)
            elif kind == "ndarray":
                values.append(np.array(arr))
            elif kind == "str":
                values.append(arr.tobytes().decode())
            else:
                values.append(arr.item())
        if self._folder:
            if self.transform is not None:
                values[0] = self.transform(values[0])
            return tuple(values) if len(values) > 1 else values[0]
        sample = _rebuild(self.structure, iter(values))
        return self.transform(sample) if self.transform is not None else sample

    def __repr__(self) -> str:
        return f"LMDBDataset({self.path!r}, {self._count} samples, fields={self.fields})"


# LMDB allows one handle per file per process, so readers of the same path share one, opened
# readonly and lock-free, with one long read transaction (the data never changes under it).
_SHARED: dict[str, list] = {}  # realpath -> [pid, env, txn, users]


def _acquire(path: str, readahead: bool):
    key = os.path.realpath(path)
    entry = _SHARED.get(key)
    if entry is not None and entry[0] != os.getpid():
        stale = list(_SHARED.values())  # handles inherited through fork belong to the parent
        _SHARED.clear()
        for _pid, env, txn, _users in stale:
            with contextlib.suppress(lmdb.Error):
                txn.abort()
                env.close()  # in the child only: the parent's handle stays open
        entry = None
    if entry is None:
        env = lmdb.open(
            path, readonly=True, lock=False, readahead=readahead, meminit=False,
            subdir=os.path.isdir(path), max_readers=2048,
        )  # fmt: skip
        entry = _SHARED[key] = [os.getpid(), env, env.begin(buffers=True), 0]
    entry[3] += 1
    return entry[1], entry[2]


def _release(path: str) -> None:
    key = os.path.realpath(path)
    entry = _SHARED.get(key)
    if entry is None or entry[0] != os.getpid():
        return
    entry[3] -= 1
    if entry[3] <= 0:
        del _SHARED[key]
        entry[2].abort()
        entry[1].close()


def read_meta(path: str | os.PathLike) -> tuple[dict, dict]:
    """(metadata, progress) of a stallscope LMDB; StallscopeError when it is not one."""
    path = str(path)
    if not os.path.exists(path):
        raise StallscopeError(f"{path}: no such LMDB")
    try:
        _env, txn = _acquire(path, readahead=False)
    except lmdb.Error as exc:
        raise StallscopeError(f"{path}: not an LMDB ({exc})") from exc
    try:
        meta, progress = txn.get(fmt.META_KEY), txn.get(fmt.PROGRESS_KEY)
        meta, progress = (bytes(v) if v is not None else None for v in (meta, progress))
    finally:
        _release(path)
    try:
        meta = fmt.loads(meta) if meta is not None else None
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != fmt.FORMAT:
        raise StallscopeError(f"{path}: an LMDB that stallscope did not write")
    if meta.get("version") != fmt.VERSION:
        raise StallscopeError(f"{path}: stallscope LMDB format {meta.get('version')} is not known")
    return meta, fmt.loads(progress) if progress is not None else {}


def _leaf_kinds(structure: dict) -> list[str]:
    if structure["type"] == "leaf":
        return [structure["kind"]]
    return [k for sub in structure["items"] for k in _leaf_kinds(sub)]


def _rebuild(structure: dict, values):
    kind = structure["type"]
    if kind == "leaf":
        return next(values)
    items = [_rebuild(sub, values) for sub in structure["items"]]
    if kind == "dict":
        return dict(zip(structure["keys"], items, strict=True))
    return tuple(items) if kind == "tuple" else items
