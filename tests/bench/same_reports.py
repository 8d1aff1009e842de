"""Check: `stallscope-cli analyze --json` gives the same report on every shared fixture trace
before and after a change (a speed change must not move a number).

    .venv/bin/python tests/bench/same_reports.py save /tmp/before     # on the old code
    .venv/bin/python tests/bench/same_reports.py diff /tmp/before     # on the new code

`diff` exits 1 and names each trace whose JSON differs (and the first differing keys).
`--tree ROOT` runs the code of another checkout (ROOT/core, ROOT/gui, ROOT/resources), e.g. a
`git archive` of the commit before the change, with the other files as they are now.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "traces"


def report(trace: Path, env: dict | None = None) -> str:
    out = subprocess.run([sys.executable, "-m", "stallscope.core.cli", "analyze", "--json",
                          str(trace)], capture_output=True, text=True, env=env)
    return f"rc={out.returncode}\n{out.stdout}\n{out.stderr}"


def first_differences(a, b, path: str = "", out: list | None = None) -> list[str]:
    out = [] if out is None else out
    if len(out) >= 5:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            first_differences(a.get(k), b.get(k), f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            first_differences(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {str(a)[:80]} != {str(b)[:80]}")
    return out


def tree_env(root: Path) -> dict:
    """An environment whose `stallscope` package is ROOT's (found on PYTHONPATH before the
    editable install's finder, which comes last on sys.meta_path)."""
    pkg = Path(tempfile.mkdtemp()) / "stallscope"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for part in ("core", "gui", "resources"):
        (pkg / part).symlink_to(root.resolve() / part)
    return {**os.environ, "PYTHONPATH": str(pkg.parent)}


def main() -> int:
    mode, folder = sys.argv[1], Path(sys.argv[2])
    env = tree_env(Path(sys.argv[4])) if sys.argv[3:4] == ["--tree"] else None
    traces = sorted(FIXTURES.glob("*.json.gz"))
    if not traces:
        sys.exit(f"no traces in {FIXTURES}")
    if mode == "save":
        folder.mkdir(parents=True, exist_ok=True)
        for t in traces:
            (folder / (t.name + ".out")).write_text(report(t, env))
        print(f"saved {len(traces)} reports in {folder}")
        return 0
    bad = 0
    for t in traces:
        old, new = (folder / (t.name + ".out")).read_text(), report(t, env)
        if old == new:
            continue
        bad += 1
        print(f"DIFFERS: {t.name}")
        try:
            a, b = (json.loads(s.split("\n", 1)[1].split("\n\n", 1)[0]) for s in (old, new))
            for line in first_differences(a, b):
                print("   ", line)
        except (ValueError, IndexError):
            print("    (not JSON)", old[:200], "|", new[:200])
    print(f"{len(traces) - bad} of {len(traces)} reports identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
