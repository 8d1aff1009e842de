"""An image folder as a conversion source: one scan (ImageFolder layout: class subfolders
become labels, or a flat folder of images) and what it found, kept in the LMDB as its listing."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from stallscope.core.lmdb.errors import SourceError, one_line

if TYPE_CHECKING:
    from stallscope.core.jobs import Job

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


@dataclass
class FolderSource:
    root: Path
    files: list[str]  # paths relative to root, sample order
    labels: np.ndarray | None  # int64 per file, None for a flat folder
    classes: list[str]
    ignored_top_level: int = 0  # images beside the class folders: not samples
    sizes: np.ndarray | None = None  # st_size per file, from the one scan
    mtimes: np.ndarray | None = None  # st_mtime_ns per file
    scan_skipped: list[dict] = field(default_factory=list)  # {"path", "reason"}: not samples
    kind: str = "folder"
    ignored_example: str = ""  # the first image beside the class folders

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

    def empty_classes(self) -> list[list]:
        """[[label, class folder]] of the class folders holding no image: their labels have
        no sample (torchvision's ImageFolder refuses such a folder)."""
        if self.labels is None:
            return []
        counts = np.bincount(self.labels, minlength=len(self.classes))
        return [[label, name] for label, name in enumerate(self.classes) if counts[label] == 0]

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
        """[(index, path, label or -1, (size, mtime_ns) as listed or None)]: the decoder
        compares the file it opens with what the scan listed."""
        labels, root, join = self.labels, str(self.root), os.path.join
        sizes, mtimes = self.sizes, self.mtimes
        listed = sizes is not None and mtimes is not None
        return [  # os.path.join: a tenth of pathlib's cost, per file, in the writing process
            (i, join(root, self.files[i]), -1 if labels is None else int(labels[i]),
             (int(sizes[i]), int(mtimes[i])) if listed else None)  # type: ignore[index]
            for i in range(start, stop)
        ]

    def relisted(self, index: int, size: int, mtime_ns: int) -> str:
        """Take a file's size and mtime as it was converted into the listing; how it differs
        from what was listed."""
        assert self.sizes is not None and self.mtimes is not None
        old = int(self.sizes[index])
        why = (f"is {size:,} bytes now, {old:,} when listed" if size != old
               else "was modified since it was listed")
        self.sizes[index], self.mtimes[index] = size, mtime_ns
        return why

    def name_of(self, index: int) -> str:
        return self.files[index]


def folder_from_listing(root: str, classes: list[str], listing) -> FolderSource:
    """The source a conversion scanned, rebuilt from the listing stored in its LMDB."""
    files, labels, sizes, mtimes = listing
    flat = len(labels) > 0 and bool(np.all(labels < 0)) and not classes
    return FolderSource(Path(root), files, None if flat else labels, list(classes),
                        sizes=sizes, mtimes=mtimes)  # fmt: skip


def scan_folder_job(root: Path) -> Job[FolderSource]:
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
    scan.reserve(class_dirs)
    if class_dirs:
        for label, name in enumerate(class_dirs):
            yield from scan.walk(name, label)
        if scan.files:
            source = scan.source(class_dirs, len(top_images))
            source.ignored_example = top_images[0].name if top_images else ""
            return source
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
        self.owners: dict[tuple[int, int], str] = {}  # a class folder's (st_dev, st_ino): name

    def reserve(self, class_dirs: list[str]) -> None:
        """Each class folder is listed as its own class: a link to it met first inside
        another class is skipped (torchvision's ImageFolder gives its files their class)."""
        for name in class_dirs:
            with contextlib.suppress(OSError):
                st = os.stat(self.root / name)
                self.owners.setdefault((st.st_dev, st.st_ino), name)

    def visit_dir(self, st: os.stat_result, rel: str) -> bool:
        key = (st.st_dev, st.st_ino)
        owner = self.owners.get(key)
        if owner is not None and rel != owner and key not in self.visited:
            self.skipped.append({"path": rel, "reason": f"a link to the class folder {owner}, "
                                 "whose files are listed as that class"})  # fmt: skip
            return False
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
