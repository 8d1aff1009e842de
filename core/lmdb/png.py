"""Plain PNGs decoded without Image.open's per-file cost: for 16x16 images PIL spends ~60 us
of Python around ~2 us of inflating (plugin lookup, chunk objects, a file object, the decoder
set up per image, tobytes for numpy).

    data = read_file(path)                  # one open/fstat/read/close
    png = parse(data)                       # PlainPNG, or None: anything but a plain PNG
    pixels = decode_group([png, ...])       # [k, h, w, bands] uint8, or None: use PIL

Only what Image.open would decode to the same pixels takes this path: 8-bit greyscale, RGB or
RGBA (colour types 0, 2, 6), not interlaced, standard compression and filter method, every chunk
whole and in place (IHDR first, one run of IDAT, IEND last), the checksum of every chunk but
IDAT right (PIL checks the same ones), no chunk outside a short list that changes nothing PIL
returns (no tRNS, PLTE, APNG frames, ...), within PIL's decompression-bomb limit. Anything else
(None here) goes through Image.open, which decides as before: its pixels or its error. The
pixels are inflated and unfiltered by PIL's own zip decoder, several images into one canvas.
"""

from __future__ import annotations

import os
import stat
import struct
import zlib
from collections.abc import Callable

import numpy as np
from PIL import Image

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHUNK = struct.Struct(">I4s")
_IHDR = struct.Struct(">IIBBBBB")
_MODES = {(8, 0): "L", (8, 2): "RGB", (8, 6): "RGBA"}  # (bit depth, colour type) -> mode
_BANDS = {"L": 1, "RGB": 3, "RGBA": 4}
# Ancillary chunks PIL reads into `info` only (or skips): the pixels are the same without them.
HARMLESS = frozenset((b"gAMA", b"cHRM", b"sRGB", b"pHYs", b"tIME", b"sBIT", b"tEXt"))


class PlainPNG:
    """A plain PNG's mode, size and compressed pixel stream (the IDAT payloads, joined)."""

    __slots__ = ("mode", "size", "idat")

    def __init__(self, mode: str, size: tuple[int, int], idat: bytes) -> None:
        self.mode = mode
        self.size = size
        self.idat = idat


def read_file(path: str) -> bytes:
    """A regular file's bytes in one read (OSError as open() raises it; a file that is not a
    regular file is an OSError too, never a wait on a FIFO)."""
    return read_file_stat(path)[0]


def read_file_stat(path: str) -> tuple[bytes, os.stat_result]:
    """read_file, and the file's stat as it was read."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path}: not a regular file")
        parts = [os.read(fd, st.st_size + 1)]
        if len(parts[0]) > st.st_size:  # it grew since fstat: read to the end
            while parts[-1]:
                parts.append(os.read(fd, 1 << 20))
        return (b"".join(parts) if len(parts) > 1 else parts[0]), st
    finally:
        os.close(fd)


def parse(data: bytes) -> PlainPNG | None:
    """The plain PNG in data, or None when it is anything else (see the module's doc)."""
    if data[:8] != SIGNATURE:
        return None
    n = len(data)
    pos = 8
    mode, size = "", (0, 0)
    idat: list[bytes] = []
    after_idat = False
    view = memoryview(data)
    while pos + 12 <= n:
        length, cid = _CHUNK.unpack_from(data, pos)
        end = pos + 12 + length
        if end > n:
            return None
        if cid == b"IDAT":
            if after_idat or not mode:
                return None
            idat.append(data[pos + 8 : end - 4])
        else:
            if idat:
                after_idat = True
            if zlib.crc32(view[pos + 4 : end - 4]) != int.from_bytes(view[end - 4 : end], "big"):
                return None
            if cid == b"IHDR":
                if pos != 8 or length != _IHDR.size:
                    return None
                w, h, depth, colour, compression, filtering, interlace = _IHDR.unpack_from(
                    data, pos + 8
                )
                mode = _MODES.get((depth, colour), "")
                if not mode or compression or filtering or interlace or not w or not h:
                    return None
                limit = Image.MAX_IMAGE_PIXELS
                if limit is not None and w * h > limit:
                    return None
                size = (w, h)
            elif cid == b"IEND":
                if not idat or end != n:
                    return None
                return PlainPNG(mode, size, idat[0] if len(idat) == 1 else b"".join(idat))
            elif not mode or cid not in HARMLESS:
                return None
        pos = end
    return None


def decode_group(
    pngs: list[PlainPNG], before: Callable[[int], None] | None = None
) -> np.ndarray | None:
    """Pixels [k, h, w, bands] (uint8) of PNGs that share mode and size, decoded by PIL's zip
    decoder into one canvas; None when any of them does not decode whole (Image.open then
    decides about each). before(j) is called before the j-th is decoded."""
    mode, (w, h) = pngs[0].mode, pngs[0].size
    k = len(pngs)
    try:
        canvas = Image.new(mode, (w, h * k))
        core = canvas.im
        for j, png in enumerate(pngs):
            if before is not None:
                before(j)
            decoder = Image._getdecoder(mode, "zip", mode)
            decoder.setimage(core, (0, j * h, w, (j + 1) * h))
            try:
                consumed, error = decoder.decode(png.idat)
            finally:
                decoder.cleanup()
            if consumed >= 0 or error != 0:  # not enough data, or a damaged stream
                return None
        raw = canvas.tobytes()
    except (AttributeError, TypeError, ValueError, OSError, MemoryError):  # a Pillow without
        return None  # these internals, or a stream it refuses: Image.open decides
    return np.frombuffer(raw, np.uint8).reshape(k, h, w, _BANDS[mode])
