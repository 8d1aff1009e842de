"""One path of each kind that core/document.open_as tells apart, made in a tmp folder from
links to the real traces and synth.make_job (tests/core/test_opening.py, the app's twin)."""

from __future__ import annotations

import json
from pathlib import Path

from fixture_traces import fixture_path
from synth import make_job


def _link(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.symlink_to(src)
    return dst


def paths(root: Path) -> dict[str, Path]:
    """One path of each kind."""
    trace = fixture_path("kineto_nw0")
    logdir = root / "logdir"
    _link(trace, logdir / "worker0.1623143089861.pt.trace.json.gz")
    session = root / "session"
    _link(trace, session / "traces" / "train.20240501-101502-123.pt.trace.json.gz")
    (session / "run.json").write_text(json.dumps({"script": "train.py", "args": []}))
    empty_session = root / "running"
    empty_session.mkdir()
    (empty_session / "run.json").write_text(json.dumps({"script": "train.py", "args": []}))
    job = root / "job"
    make_job(job, 3, fixture_path("hta_sampled_rank-0"))
    return {"file": trace, "logdir": logdir, "session": session, "running": empty_session,
            "job": job}
