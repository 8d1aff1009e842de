"""Decoding: a task of samples (see FolderSource.task / FactorySource.task) into LMDB records,
one Decoder per worker process, built from source_desc (which pickles; a source may not).
A folder's plain PNGs skip Image.open (png.py) and their records are built for a whole task at
once; encode() lays a task's records end to end with their sizes and crc32s, so the writer
handles a task, not each record."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, cast

import numpy as np
from PIL import Image

from stallscope.core.lmdb import png
from stallscope.core.lmdb.errors import SampleError, SampleExit, one_line
from stallscope.core.lmdb.factory import load_factory
from stallscope.core.lmdb.flatten import flatten
from stallscope.core.lmdb.format import layout_key, plan, write
from stallscope.core.lmdb.images import (
    Preprocess,
    changes_nothing,
    image_to_chw,
    narrowed,
    padded_size,
    preprocess_image,
)
from stallscope.core.lmdb.source import Source
from stallscope.core.lmdb.structure import describe

NARROWED = "narrowed:"  # a kept sample's note: "narrowed:I;16", its mode clipped to 8 bits
PADDED = "padded:"  # a kept sample's note: "padded:100x80", its size (resized) under the crop
# a kept sample's note: "changed:<size>:<mtime_ns>", a file that is not as the scan listed it
# (changed before a resume took it in): converted as it is now, its listing entry updated
CHANGED = "changed:"


def source_desc(source: Source) -> dict:
    return {"kind": source.kind, "spec": source.spec}


class _OsExit(SystemExit):
    """os._exit called by a __getitem__ that runs in stallscope's own process."""


@contextlib.contextmanager
def _exit_raises():
    """In the converter's own process (the probe's first samples, workers=0), os._exit raises
    instead of ending it without a word; a decoding worker still just ends (the pool names
    the sample)."""
    if multiprocessing.parent_process() is not None:
        yield
        return
    real = os._exit

    def raise_exit(code: int = 0):
        raise _OsExit(code)

    os._exit = raise_exit
    try:
        yield
    finally:
        os._exit = real


class Decoder:
    """Turns a task (see Source.task) into records; one per worker process."""

    def __init__(self, source_desc: dict, preprocess: dict, structure: dict | None) -> None:
        self.kind = source_desc["kind"]
        self.pre = Preprocess.from_dict(preprocess)
        self.structure = structure
        self.dataset: Any = None
        self.note = ""  # about the last sample() decoded and kept (notes(): "\n" between)
        self.name = Path(source_desc["spec"]).name
        if self.kind == "factory":
            path, name = source_desc["spec"].rsplit(":", 1)
            self.dataset = load_factory(path, name)

    def sample(self, entry) -> tuple[int, dict | None, list[tuple[str, str, np.ndarray]]]:
        """-> (source index, structure, leaves). Raises SampleError."""
        self.note = ""
        if self.kind == "folder":
            index, path, label = entry[:3]
            mode, size, st, dtype, arr = _load_image(path, self.pre)
            self.note = "\n".join(n for n in (self.notes(mode, *size), _changed(entry, st)) if n)
            leaves = [("image", dtype, arr)]
            if label >= 0:
                leaves.append(("int", "int64", np.asarray(label, np.int64)))
            return index, self.structure, leaves
        index = entry
        try:
            with _exit_raises():
                item = self.dataset[index]
        except SystemExit as exc:
            how = "os._exit" if isinstance(exc, _OsExit) else "sys.exit"
            raise SampleExit(f"sample {index} ({self.name}[{index}]) called {how}({exc.code!r})"
                             " in __getitem__; the samples before it are kept") from exc
        except Exception as exc:  # noqa: BLE001 - the user's __getitem__ failed for this one
            raise SampleError(one_line(exc)) from exc
        try:
            structure, leaves = flatten(item, self.pre, self.structure)
        except RecursionError as exc:
            raise SampleError("nested too deeply to store") from exc
        if self.structure is not None and structure != self.structure:
            raise SampleError(f"structure {describe(structure)} differs from sample 0's")
        notes = (self.notes(img.mode, *img.size) for img in _pil_images(item))
        self.note = "\n".join(dict.fromkeys(n for note in notes if note for n in note.split("\n")))
        return index, structure, leaves

    def notes(self, mode: str, w: int, h: int) -> str:
        """What preprocessing did to an image of this mode and size that the user should hear
        of: its values clipped to 8 bits (NARROWED), black added by the crop (PADDED)."""
        notes = [NARROWED + mode] if narrowed(self.pre, mode) else []
        size = padded_size(self.pre, w, h)
        if size is not None:
            notes.append(f"{PADDED}{size[0]}x{size[1]}")
        return "\n".join(notes)

    def decode(self, task: list, current=None, w: int = 0) -> list[tuple[int, tuple | None, str]]:
        """-> [(source index, (header, offsets, size, arrays) or the finished record (a uint8
        row) or None, why it is skipped or a note on one kept)], for encode(). `current[w]`
        (shared memory) names the sample being decoded, for when a __getitem__ kills its
        process."""

        if self.kind == "folder":
            return self._decode_folder(task, current, w)
        return [self._planned(entry, entry, current, w) for entry in task]

    def _planned(self, entry, index: int, current, w: int) -> tuple[int, tuple | None, str]:
        """One sample decoded the general way (Image.open for a folder's file)."""
        if current is not None:
            current[w] = index
        try:
            _, _, leaves = self.sample(entry)
        except SampleError as exc:
            return index, None, str(exc)
        return index, _plan_leaves(index, leaves), self.note

    def _decode_folder(self, task: list, current, w: int) -> list[tuple[int, tuple | None, str]]:
        """A folder's task: plain PNGs (png.py) read whole and decoded together, a group per
        mode and size; every other file (and a PNG that png.py leaves to PIL) via Image.open."""
        out: list[tuple[int, tuple | None, str] | None] = [None] * len(task)
        groups: dict[tuple[str, tuple[int, int], bool], list[tuple[int, png.PlainPNG]]] = {}
        changed = [""] * len(task)
        for pos, (index, path, label, *_listed) in enumerate(task):
            plain = None
            if path[-4:].lower() == ".png":
                if current is not None:
                    current[w] = index
                try:
                    data, st = png.read_file_stat(path)
                    plain = png.parse(data)
                    changed[pos] = _changed(task[pos], st)
                except OSError:
                    plain = None  # Image.open says what is wrong, as it always has
            if plain is None:
                out[pos] = self._planned(task[pos], index, current, w)
            else:
                key = (plain.mode, plain.size, label >= 0)
                groups.setdefault(key, []).append((pos, plain))
        for (mode, _size, labelled), members in groups.items():

            def before(j: int, members=members) -> None:
                if current is not None:
                    current[w] = task[members[j][0]][0]

            pixels = png.decode_group([plain for _pos, plain in members], before)
            if pixels is None:
                for pos, _plain in members:
                    out[pos] = self._planned(task[pos], task[pos][0], current, w)
                continue
            rows = self._rows(mode, pixels, [task[pos] for pos, _plain in members], labelled)
            for j, (pos, _plain) in enumerate(members):
                index, _path, label = task[pos][:3]
                if rows is not None:
                    out[pos] = (index, rows[j], changed[pos])
                    continue
                dtype, arr = self._preprocessed(mode, pixels[j])
                leaves = [("image", dtype, arr)]
                if labelled:
                    leaves.append(("int", "int64", np.asarray(label, np.int64)))
                note = "\n".join(n for n in (self.notes(mode, pixels.shape[2], pixels.shape[1]),
                                              changed[pos]) if n)  # fmt: skip
                out[pos] = (index, _plan_leaves(index, leaves), note)
        return out  # type: ignore[return-value]  # every position is filled above

    def _rows(self, mode: str, pixels: np.ndarray, entries: list, labelled: bool):
        """The finished records ([k, record size] uint8) of decoded images that preprocessing
        leaves as they are, built for all k at once; None when it changes them."""
        k, h, w, bands = pixels.shape
        if not changes_nothing(self.pre, mode, w, h):
            return None
        fields: list[tuple[str, tuple[int, ...]]] = [("uint8", (bands, h, w))]
        if labelled:
            fields.append(("int64", ()))
        header, offsets, size = plan(0, fields)
        rows = np.zeros((k, size), np.uint8)
        rows[:, : len(header)] = np.frombuffer(header, np.uint8)
        indices = np.fromiter((e[0] for e in entries), "<u4", k)
        rows[:, 4:8] = indices.view(np.uint8).reshape(k, 4)
        image = rows[:, offsets[0] : offsets[0] + bands * h * w].reshape(k, bands, h, w)
        image[...] = pixels.transpose(0, 3, 1, 2)
        if labelled:
            labels = np.fromiter((e[2] for e in entries), "<i8", k)
            rows[:, offsets[1] : offsets[1] + 8] = labels.view(np.uint8).reshape(k, 8)
        return rows

    def _preprocessed(self, mode: str, hwc: np.ndarray) -> tuple[str, np.ndarray]:
        """(dtype, CHW) of decoded pixels, as load_image gives them for the same file."""
        img = Image.fromarray(hwc[:, :, 0] if mode == "L" else hwc)
        return image_to_chw(preprocess_image(img, self.pre))

class Encoded(NamedTuple):
    """A task's records laid end to end (in a /dev/shm slot, or here), what the writer needs
    to put them into chunks with no work per record, and the samples it skips."""

    where: int | bytes | bytearray  # the slot number, or the records' bytes
    nbytes: int
    sizes: bytes  # int64 per record
    crcs: bytes  # uint32 (zlib.crc32) per record
    skips: list[tuple[int, str]]  # (source index, reason)
    stop: int  # the last source index of the task + 1
    layouts: dict[bytes, list[int]]  # format.layout_key -> [records, first source index]
    notes: list[tuple[int, str]]  # (source index, note) on kept samples (NARROWED + mode)


def encode(decoded: list, buffer: Callable[[int], tuple[memoryview, int | None]]) -> Encoded:
    """A decoded task ([(source index, planned record, finished row or None, reason)]) as
    one run of records: buffer(nbytes) gives (a writable view of at least nbytes, its slot
    number or None for bytes kept here)."""
    kept = [(planned, index) for index, planned, _reason in decoded if planned is not None]
    skips = [(index, reason) for index, planned, reason in decoded if planned is None]
    notes = [(index, one) for index, planned, note in decoded if planned is not None and note
             for one in note.split("\n")]
    sizes = np.fromiter(
        (p[2] if isinstance(p, tuple) else len(p) for p, _i in kept), np.int64, len(kept)
    )
    nbytes = int(sizes.sum())
    crcs = np.empty(len(kept), "<u4")
    stop = decoded[-1][0] + 1 if decoded else 0
    layouts: dict[bytes, list[int]] = {}
    if not nbytes:
        return Encoded(b"", 0, sizes.tobytes(), crcs.tobytes(), skips, stop, layouts, notes)
    mv, slot = buffer(nbytes)
    with mv:
        pos = 0
        crc32 = zlib.crc32
        key, last_group = b"", None
        for k, (planned, index) in enumerate(kept):
            size = int(sizes[k])
            if isinstance(planned, tuple):
                header, offsets, _size, arrays = planned
                write(mv, pos, header, offsets, arrays)
            else:
                mv[pos : pos + size] = planned
            crcs[k] = crc32(mv[pos : pos + size])
            # every record's layout, not a survey's: rows built together share one header
            group = planned[0] if isinstance(planned, tuple) else planned.base
            if group is not last_group or group is None:
                key, last_group = layout_key(mv, pos), group
            seen = layouts.get(key)
            if seen is None:
                layouts[key] = [1, index]
            else:
                seen[0] += 1
            pos += size
        where = slot if slot is not None else cast(bytearray, mv.obj)  # buffer()'s own
    return Encoded(where, nbytes, sizes.tobytes(), crcs.tobytes(), skips, stop, layouts, notes)


def _pil_images(obj, depth: int = 0):
    """The PIL images in a factory's sample (tuples, lists and dicts of them, as flatten
    walks it): what preprocessing did to them is noted as for a folder's files."""
    if isinstance(obj, Image.Image):
        yield obj
    elif depth < 32 and isinstance(obj, tuple | list):
        for item in obj:
            yield from _pil_images(item, depth + 1)
    elif depth < 32 and isinstance(obj, dict):
        for item in obj.values():
            yield from _pil_images(item, depth + 1)


def _plan_leaves(index: int, leaves: list) -> tuple:
    header, offsets, size = plan(index, [(d, a.shape) for _k, d, a in leaves])
    return header, offsets, size, [a for _k, _d, a in leaves]


def load_image(path: str, pre: Preprocess) -> tuple[str, np.ndarray]:
    """(dtype, CHW array) of one image file; SampleError (without the path) when it fails."""
    _mode, _size, _st, dtype, arr = _load_image(path, pre)
    return dtype, arr


def _changed(entry: tuple, st: os.stat_result | None) -> str:
    """CHANGED + the file's size and mtime when it is not as the scan listed it, else ''
    (entry: a folder task's (index, path, label[, (size, mtime_ns) as listed]))."""
    listed = entry[3] if len(entry) > 3 else None
    if listed is None or st is None:
        return ""
    size, mtime = listed
    if st.st_size == size and (not mtime or st.st_mtime_ns == mtime):
        return ""
    return f"{CHANGED}{st.st_size}:{st.st_mtime_ns}"


def _fstat(img: Image.Image) -> os.stat_result | None:
    try:
        return os.fstat(getattr(img, "fp").fileno())  # noqa: B009 - ImageFile, not Image
    except (AttributeError, OSError, ValueError):
        return None


def _load_image(path: str, pre: Preprocess
                ) -> tuple[str, tuple[int, int], os.stat_result | None, str, np.ndarray]:
    """(the file's colour mode, its size (w, h), its stat as opened, dtype, CHW array), as
    load_image."""
    try:
        with Image.open(path) as img:  # decoded by the array conversion, inside this try
            st = _fstat(img)
            return (img.mode, img.size, st, *image_to_chw(preprocess_image(img, pre)))
    except Exception as exc:  # noqa: BLE001 - any decoder failure is a skipped sample
        text = one_line(exc).replace(repr(path), "").replace(f"'{path}'", "").replace(path, "")
        raise SampleError(text.rstrip().rstrip(":").rstrip()) from exc  # the line names it
