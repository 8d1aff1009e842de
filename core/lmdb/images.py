"""Images as the LMDB stores them: the fixed preprocessing (resize, centre crop, RGB) and the
conversion of a PIL image to a CHW array, and back to a thumbnail.

    pre = Preprocess(resize=256, crop=(224, 224)); pre.describe(); pre.to_dict()
    dtype, chw = image_to_chw(preprocess_image(img, pre))
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from PIL import Image

from stallscope.core.errors import StallscopeError

FLOAT_CHOICES = ("auto", "float32", "float16")


@dataclass(frozen=True)
class Preprocess:
    """Fixed preprocessing of PIL images, done once at conversion.

    resize: None, an int (shorter side, aspect kept; torchvision `Resize(int)`) or (w, h).
    crop:   None or (w, h), centred (torchvision `CenterCrop`).
    rgb:    convert every image to 3-channel RGB (torchvision's default loader does).
    floats: what float tensors/arrays of a factory become: "auto" (uint8 when every value is
            k/255, as ToTensor() makes them, else as they are), "float32" (as they are) or
            "float16" (half the bytes, rounded).
    """

    resize: int | tuple[int, int] | None = None
    crop: tuple[int, int] | None = None
    rgb: bool = True
    floats: str = "auto"

    def __post_init__(self) -> None:
        if self.floats not in FLOAT_CHOICES:
            raise StallscopeError(f"floats {self.floats!r}: expected one of {FLOAT_CHOICES}")

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
            floats=str(d.get("floats", "auto")),
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
        if self.floats != "auto":
            parts.append(f"floats as {self.floats}")
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


def changes_nothing(pre: Preprocess, mode: str, w: int, h: int) -> bool:
    """Whether preprocess_image + image_to_chw leave an image of this mode and size as it is
    (its pixels, transposed to CHW): then a decoder may skip them."""
    if mode not in ("L", "RGB", "RGBA") or (pre.rgb and mode != "RGB"):
        return False
    if pre.resize:
        size = _short_side(w, h, pre.resize) if isinstance(pre.resize, int) else pre.resize
        if tuple(size) != (w, h):
            return False
    return not pre.crop or tuple(pre.crop) == (w, h)


def padded_size(pre: Preprocess, w: int, h: int) -> tuple[int, int] | None:
    """The size (after the resize) of an image of w x h that the centre crop is larger than
    in width or height, so that the crop pads it with black; None when the crop fits."""
    if not pre.crop:
        return None
    if isinstance(pre.resize, int):
        w, h = _short_side(w, h, pre.resize)
    elif pre.resize:
        w, h = pre.resize
    cw, ch = pre.crop
    return (w, h) if cw > w or ch > h else None


def padded_line(found: list[dict], crop: list | tuple | None, resized: bool = False) -> str:
    """One warning for the images the centre crop padded with black (found: [{"size",
    "count", "example"}], as a finished conversion's meta "padded"; size "WxH" after resizing,
    or "other sizes")."""
    if not found:
        return ""
    n = sum(int(f["count"]) for f in found)
    sizes = "; ".join(f"{f['size']}: {int(f['count']):,}, e.g. {f['example']}" for f in found[:5])
    more = f"; {len(found) - 5} more sizes" if len(found) > 5 else ""
    what = f"--crop {crop[0]}x{crop[1]}" if crop else "the crop"
    after = "; sizes after the resize" if resized else ""
    return (f"warning: {what} is larger than {n:,} image(s) ({sizes}{more}{after}): the crop "
            "padded them with black; --resize to at least the crop size, or a smaller --crop, "
            "keeps only real pixels")


def preprocess_image(img: Image.Image, pre: Preprocess) -> Image.Image:
    if pre.rgb and img.mode != "RGB":
        img = img.convert("RGB")
    if pre.resize:
        size = _short_side(*img.size, pre.resize) if isinstance(pre.resize, int) else pre.resize
        if size != img.size:
            img = img.resize(size, Image.Resampling.BILINEAR)
    if pre.crop:
        w, h = img.size
        cw, ch = pre.crop
        left, top = int(round((w - cw) / 2.0)), int(round((h - ch) / 2.0))
        img = img.crop((left, top, left + cw, top + ch))
    return img


# Modes with more than 8 bits per channel: PIL's convert("RGB") (and so torchvision's
# ImageFolder loader) clips their values to 0..255; --keep-mode stores them as they are.
DEEP_MODES = {"I;16": "uint16", "I;16B": "uint16", "I;16L": "uint16", "I;16N": "uint16",
              "I": "int32", "F": "float32"}  # fmt: skip


def narrowed(pre: Preprocess, mode: str) -> bool:
    """Whether preprocessing turns an image of this mode into 8 bits, clipping its values."""
    return pre.rgb and mode in DEEP_MODES


def narrowed_line(found: list[dict]) -> str:
    """One warning for the images of more than 8 bits per channel converted to 8-bit RGB
    (found: [{"mode", "count", "example"}], as a finished conversion's meta "narrowed")."""
    if not found:
        return ""
    n = sum(int(f["count"]) for f in found)
    modes = "; ".join(f"{f['mode']}: {int(f['count']):,}, e.g. {f['example']}" for f in found)
    kept = "/".join(dict.fromkeys(DEEP_MODES.get(f["mode"], "their own dtype") for f in found))
    return (f"warning: {n:,} image(s) of more than 8 bits per channel ({modes}) were converted "
            "to 8-bit RGB as PIL's convert(\"RGB\") and torchvision's ImageFolder do: every "
            f"value above 255 became 255; --keep-mode stores them as {kept}")


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
