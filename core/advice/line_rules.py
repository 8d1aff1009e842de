"""Line heatmap advice: the hottest lines of Dataset.__getitem__ matched against known costly
patterns (image decode, per-sample float conversion, resizing fixed data, torch.load of bytes),
each with the change that removes it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from stallscope.core.advice.registry import Context, rule
from stallscope.core.lineprof import Profile, heaviest_line_of, primary
from stallscope.core.report import Advice
from stallscope.core.units import duration, pct

MIN_SHARE = 0.10  # a line worth naming: this share of __getitem__'s time
TOP_LINES = 3

# (pattern id, regex over the line's source, what the line does)
PATTERNS = (
    ("decode", re.compile(r"Image\.open|\.convert\(|cv2\.imread|cv2\.imdecode|imageio\.v?\d?"
                          r"\.?imread|decode_(?:image|jpeg|png)|read_image\(|io\.imread"),
     "decodes an image per sample"),
    ("torch_load", re.compile(r"torch\.load\("), "unpickles a tensor per sample"),
    ("augment", re.compile(r"Random\w*(?:Crop|Resized|Resize)"), "augments each sample at random"),
    ("resize", re.compile(r"[Rr]esize|[Cc]rop\(|CenterCrop|interpolate\(|thumbnail\("),
     "resizes or crops each sample"),
    ("to_float", re.compile(r"\.float\(\)|/\s*255|\.div_?\(\s*255|\.to\(\s*(?:dtype\s*=\s*)?"
                            r"torch\.float|ToTensor\(|[Nn]ormalize\(|\.astype\([^)]*float"
                            r"|-\s*mean|/\s*std"),
     "converts each sample to float"),
)


@dataclass
class HotLine:
    function: str
    lineno: int
    source: str
    share: float   # of __getitem__'s time
    pattern: str
    does: str
    fix: str


def _fix(pattern: str, code: str, gpu: bool) -> str:
    if pattern == "decode":
        return (f"`{code}` decodes an image every time a sample is read: convert the dataset "
                "once into an LMDB of decoded uint8 tensors with the LMDB wizard "
                "(stallscope-cli convert) and read those instead.")
    if pattern == "torch_load":
        return (f"`{code}` unpickles bytes per sample: store the raw tensor bytes and read them "
                "with torch.frombuffer(buf, dtype=...).reshape(shape) (no pickle, no copy).")
    if pattern == "augment":
        return (f"`{code}` is random per sample, so it cannot be done ahead: run it per batch "
                "on the GPU (torchvision.transforms.v2 on a batch tensor), or give it more "
                "workers.")
    if pattern == "resize":
        return (f"`{code}` resizes or crops data that never changes, on every read: do it once "
                "when converting (the LMDB wizard stores the resized uint8 images).")
    where = ("on the GPU after batch.to(device, non_blocking=True)" if gpu
             else "once per batch in the training loop")
    return (f"`{code}` makes a float copy of every sample (4x the bytes of uint8 through the "
            f"workers' queue and the copy): keep uint8 in the Dataset and do "
            f"batch.float().div_(255) (and any normalisation) {where}.")


def hot_line(profiles: list[Profile] | None, gpu: bool = True) -> HotLine | None:
    """The hottest line of __getitem__ (or of a helper it calls) matching a known pattern,
    among the top lines worth >= 10% of its time."""
    top = primary(profiles or [])
    if top is None or top.total_s <= 0:
        return None
    candidates = [(top.qualname, ln.lineno, ln.source.strip(), top.share(ln))
                  for ln in top.top_lines(TOP_LINES)]
    inner = heaviest_line_of(profiles or [])
    if inner is not None and inner[0] != top.qualname:
        candidates.insert(0, inner)
    for func, lineno, source, share in candidates:
        if share < MIN_SHARE:
            continue
        for pattern, regex, does in PATTERNS:
            if regex.search(source):
                code = source if len(source) <= 70 else source[:67] + "..."
                return HotLine(func, lineno, source, share, pattern, does,
                               _fix(pattern, code, gpu))
    return None


@rule("dataset_line")
def dataset_line(ctx: Context) -> Advice | None:
    hot = hot_line(ctx.line_stats, ctx.gpu)
    if hot is None:
        return None
    dev, waited = ctx.cause_on("data_loading")
    top = primary(ctx.line_stats or [])
    assert top is not None  # hot_line found its line in this profile
    per_sample = top.total_s / top.samples * 1e6 if top.samples else 0.0
    samples = f" ({duration(per_sample)} per sample over {top.samples:,} samples)" \
        if top.samples else ""
    evidence = (f"Line heatmap: {hot.function} line {hot.lineno} (`{hot.source[:70]}`) "
                f"{hot.does}: {pct(hot.share)} of the time in __getitem__{samples}.")
    if waited > 0:
        evidence += (f" The main thread waited {duration(waited)} on the DataLoader; this line "
                     f"is about {pct(hot.share)} of that.")
    return Advice("dataset_line", f"__getitem__ {hot.does}", evidence, hot.fix,
                  cause="data_loading", focus=ctx.focus("data_loading", dev),
                  saving_us=hot.share * waited, device=dev)
