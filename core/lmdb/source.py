"""What an LMDB conversion reads: an image folder or a Python factory, opened from a spec:
    "path/to/folder"            ImageFolder layout (class subfolders become labels), or flat
    "path/to/file.py:factory"   `factory()` (or a module-level object) is a map-style Dataset whose
                                items are tensors / arrays / PIL images / numbers / str, or
                                (nested) tuples, lists and dicts of them

Each sample is flattened into leaves (flatten.py) whose structure is stored once in the LMDB's
metadata (structure.py); Decoder (decoder.py) turns a source's tasks into records. The two
kinds: folder.py (its one scan) and factory.py (importing the user's file).
"""

from __future__ import annotations

import os
from pathlib import Path

from stallscope.core.jobs import Job, run_job
from stallscope.core.lmdb.factory import FactorySource, is_factory_spec, open_factory
from stallscope.core.lmdb.folder import FolderSource, scan_folder_job

Source = FolderSource | FactorySource


def open_source(spec: str | os.PathLike) -> Source:
    return run_job(open_source_job(spec))


def open_source_job(spec: str | os.PathLike) -> Job[Source]:
    """open_source as a job: a folder's scan yields (files found, 0) as it goes."""
    spec = str(spec)
    if is_factory_spec(spec):
        return open_factory(spec)
    return (yield from scan_folder_job(Path(spec).expanduser()))
