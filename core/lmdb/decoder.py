"""Decoding: a task of samples (see FolderSource.task / FactorySource.task) into LMDB records,
one Decoder per worker process, built from source_desc (which pickles; a source may not)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from stallscope.core.lmdb.errors import SampleError, SampleExit, one_line
from stallscope.core.lmdb.factory import load_factory
from stallscope.core.lmdb.flatten import flatten
from stallscope.core.lmdb.format import plan, write
from stallscope.core.lmdb.images import Preprocess, image_to_chw, preprocess_image
from stallscope.core.lmdb.source import Source
from stallscope.core.lmdb.structure import describe


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


def load_image(path: str, pre: Preprocess) -> tuple[str, np.ndarray]:
    """(dtype, CHW array) of one image file; SampleError (without the path) when it fails."""
    try:
        with Image.open(path) as img:  # decoded by the array conversion, inside this try
            return image_to_chw(preprocess_image(img, pre))
    except Exception as exc:  # noqa: BLE001 - any decoder failure is a skipped sample
        text = one_line(exc).replace(repr(path), "").replace(f"'{path}'", "").replace(path, "")
        raise SampleError(text.rstrip()) from exc
