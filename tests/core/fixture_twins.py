"""Twins of the shared real traces, built in tmp_path: the same events with one thing changed
(steps removed, a span renamed, events added), so a test can show what that one thing does."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from fixture_traces import fixture_path

from stallscope.core.analysis import analyze
from stallscope.core.report import Report
from stallscope.core.trace import load


def document(prefix: str) -> dict:
    """The fixture's JSON document (its traceEvents and metadata)."""
    path = fixture_path(prefix)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def save(doc: dict, path: Path) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def analyzed(doc: dict, path: Path) -> Report:
    return analyze(load(save(doc, path)))


def without_steps(doc: dict) -> dict:
    """The document without its ProfilerStep#N events (CPU and GPU copies alike)."""
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if not str(e.get("name", "")).startswith("ProfilerStep#")]
    return doc


def complete(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]
