"""What a finished conversion says beyond its figures, the same words in `convert` and the
wizard: images made 8-bit, images the crop padded with black, images beside the class folders
that are not samples, source files changed between the scan and their conversion.

    for line in notices(result): print(line)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stallscope.core.lmdb.images import narrowed_line, padded_line

if TYPE_CHECKING:
    from stallscope.core.lmdb.convert import ConvertResult

LISTED = 5  # changed files named one by one


def notices(result: ConvertResult) -> list[str]:
    lines = [narrowed_line(result.narrowed),
             padded_line(result.padded, result.crop, result.resized),
             top_level_line(result.top_level), empty_classes_line(result.empty_classes),
             *changed_lines(result.changed)]
    return [line for line in lines if line]


def top_level_line(top: dict) -> str:
    n = int(top.get("count") or 0)
    if not n:
        return ""
    example = f" (e.g. {top['example']})" if top.get("example") else ""
    return (f"note: {n:,} image(s) beside the class folders{example} are not converted: with "
            "class subfolders, only the images inside them are samples (ImageFolder's layout); "
            "move them into a class folder to include them")


def empty_classes_line(empty: list[list]) -> str:
    if not empty:
        return ""
    named = ", ".join(f"{name} ({label})" for label, name in empty[:LISTED])
    more = f" and {len(empty) - LISTED:,} more" if len(empty) > LISTED else ""
    return (f"warning: {len(empty):,} class folder(s) hold no image: {named}{more}; their "
            "labels (in brackets) have no samples (torchvision's ImageFolder refuses such a "
            "folder); remove those folders or put images in them")


def changed_lines(changed: list[dict]) -> list[str]:
    """Source files that were not as the scan listed them when they were converted (changed
    before a resume took them in): converted as they are now, their listing updated."""
    if not changed:
        return []
    return [f"note: {len(changed):,} source file(s) changed since the scan listed them "
            f"({_names(changed)}): converted as they are now"]


def _names(items: list[dict]) -> str:
    shown = "; ".join(f"{c['path']} {c['reason']}" for c in items[:LISTED])
    more = f"; {len(items) - LISTED:,} more" if len(items) > LISTED else ""
    return shown + more
