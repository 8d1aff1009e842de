"""`make gpu-check`: small training scripts run under the runner on CUDA, each must produce its
advice id (docs/definitions.md "Advice"). Without a CUDA device it says so and exits 0.

    python tests/gpu/check.py          # on a CUDA machine: about a minute
    python tests/gpu/check.py --cpu    # smoke run on the CPU: the scripts run and analyse,
                                       # no advice is asserted (a CPU has no GPU to idle)

Not collected by pytest (tests/gpu is outside testpaths). The runner is started by file path
(core/capture/runner.py), as the app starts it in the user's interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "core" / "capture" / "runner.py"
SCENARIOS = Path(__file__).resolve().parent / "scenarios"
EXPECTED = {  # script -> the advice id it must produce
    "dataloader.py": "dataloader_bound",
    "pageable.py": "pageable_h2d",
    "item_sync.py": "sync_stalls",
    "shape_churn.py": "allocator_churn",
    "tiny_kernels.py": "small_kernels",
}
TIMEOUT_S = 150


def run_scenario(script: Path, device: str, tmp: Path) -> tuple[list[str], str]:
    """Run one script under the runner; (advice ids, a line about the run)."""
    from stallscope.core.document import analyze_path
    from stallscope.core.errors import StallscopeError
    from stallscope.core.trace import find_traces

    session = tmp / script.stem
    env = dict(os.environ, STALLSCOPE_GPU_CHECK_DEVICE=device)
    cmd = [sys.executable, str(RUNNER), "--session", str(session), "--wait", "2",
           "--warmup", "2", "--active", "4", "--", str(script)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp,
                          timeout=TIMEOUT_S)
    traces = find_traces(session) if session.is_dir() else []
    if not traces:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return [], f"no trace (rc {proc.returncode}): " + " | ".join(tail)
    try:
        report = analyze_path(traces[0])
    except StallscopeError as exc:
        return [], f"analysis failed: {exc}"
    ids = [a.id for a in report.advice]
    util = ", ".join(f"GPU {d} {100 * s.utilization:.0f}% busy"
                     for d, s in report.devices.items()) or "no GPU activity"
    return ids, f"{len(report.steps)} steps, {util}"


def main(argv: list[str]) -> int:
    cpu = "--cpu" in argv
    try:
        import torch
    except ImportError:
        print("no CUDA device: skipped (torch is not installed)")
        return 0
    if not cpu and not torch.cuda.is_available():
        build = "" if torch.version.cuda or torch.version.hip else \
            f" (torch {torch.__version__} is a CPU-only build)"
        print(f"no CUDA device: skipped{build}")
        return 0
    sys.path.insert(0, str(ROOT))
    device = "cpu" if cpu else "cuda"
    failed = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="stallscope-gpu-check-") as tmp:
        for name, want in EXPECTED.items():
            t0 = time.monotonic()
            ids, note = run_scenario(SCENARIOS / name, device, Path(tmp))
            ok = bool(note) and not note.startswith(("no trace", "analysis failed")) \
                and (cpu or want in ids)
            if not ok:
                failed.append(name)
            print(f"{'ok  ' if ok else 'FAIL'} {name:<16} wants {want:<17} got "
                  f"{', '.join(ids) or 'no advice'} ({note}; {time.monotonic() - t0:.0f} s)",
                  flush=True)
    print(f"{len(EXPECTED) - len(failed)} of {len(EXPECTED)} scenarios passed on {device} in "
          f"{time.monotonic() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
