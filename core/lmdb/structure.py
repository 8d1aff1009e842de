"""The structure that puts a sample's flat leaves back together, stored once as JSON in the
LMDB's metadata: {"type": "leaf", "kind": ...} or {"type": "tuple"|"list"|"dict", "items": [...]}
(a dict also has "keys"). Its field names, a one-line description, its leaves in order, a
sample rebuilt from them, and what is wrong with one read from a file."""

from __future__ import annotations

LEAF_KINDS = ("image", "tensor", "ndarray", "int", "float", "bool", "str")
MAX_NESTING = 64  # of a structure read from a file (flatten writes at most 32)


def leaf_names(structure: dict, prefix: str = "") -> list[str]:
    """Field names of the leaves in order: 'image', '0', 'lr', '1.depth', ..."""
    if structure["type"] == "leaf":
        return [prefix or "value"]
    keys = structure.get("keys") or [str(i) for i in range(len(structure["items"]))]
    names = []
    for key, sub in zip(keys, structure["items"], strict=True):
        names += leaf_names(sub, f"{prefix}.{key}" if prefix else key)
    return names


def describe(structure: dict) -> str:
    """'(image, int)', '{x: tensor, y: [int, str]}', ..."""
    if structure["type"] == "leaf":
        return structure["kind"]
    inner = ", ".join(describe(s) for s in structure["items"])
    if structure["type"] == "dict":
        pairs = zip(structure["keys"], structure["items"], strict=True)
        inner = ", ".join(f"{k}: {describe(s)}" for k, s in pairs)
        return "{" + inner + "}"
    return f"({inner})" if structure["type"] == "tuple" else f"[{inner}]"


def leaf_nodes(structure: dict) -> list[dict]:
    """The leaf nodes in order (one per stored field)."""
    if structure.get("type") == "leaf":
        return [structure]
    return [leaf for sub in structure.get("items", ()) for leaf in leaf_nodes(sub)]


def rebuild(structure: dict, values):
    """The sample, from an iterator over its leaf values in order."""
    kind = structure["type"]
    if kind == "leaf":
        return next(values)
    items = [rebuild(sub, values) for sub in structure["items"]]
    if kind == "dict":
        return dict(zip(structure["keys"], items, strict=True))
    return tuple(items) if kind == "tuple" else items


def structure_problem(st, depth: int = 0) -> str:
    """What is wrong with a structure read from a file ('' when nothing)."""
    if depth > MAX_NESTING:
        return "nested too deeply"
    if not isinstance(st, dict):
        return f"a {type(st).__name__} where a node should be"
    kind = st.get("type")
    if kind == "leaf":
        if st.get("kind") not in LEAF_KINDS:
            return f"leaf kind {st.get('kind')!r}"
        for mark in ("quant", "cast"):
            if mark in st and st[mark] not in ("float16", "float32", "float64"):
                return f"{mark} {st[mark]!r}"
        return ""
    items = st.get("items")
    if kind not in ("tuple", "list", "dict") or not isinstance(items, list):
        return f"node type {kind!r}"
    if kind == "dict":
        keys = st.get("keys")
        if not isinstance(keys, list) or len(keys) != len(items):
            return "dict keys"
    for sub in items:
        problem = structure_problem(sub, depth + 1)
        if problem:
            return problem
    return ""
