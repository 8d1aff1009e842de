"""Renders the README screenshot, resources/screenshot.png, with the app's --screenshot mode.

    python resources/make_readme_screenshot.py                 # auto (see below)
    python resources/make_readme_screenshot.py --source demo    # run the demo under the profiler
    python resources/make_readme_screenshot.py --trace PATH     # any trace or session

auto: the real trace kineto_nw0_* from ../shared/fixtures/traces when present (a GPU run
starved by its DataLoader: the same image on every machine, which tests/gui/test_hero_image.py
checks the committed one against), else the bundled demo (a GPU trace where torch sees one,
else its CPU-only session).
Runs in a throwaway config dir, so your recent list and layout stay as they were.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURES = ROOT.parent / "shared" / "fixtures" / "traces"
DEMO = HERE / "demo" / "train_demo.py"
SIZE = "1400x860"


def has_cuda() -> bool:
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def run_demo(work: Path) -> Path:
    session = work / "demo-session"
    cmd = [sys.executable, "-m", "stallscope.core.cli", "run", "--session", str(session),
           "--no-analyze", "--", str(DEMO)]
    print("running the demo:", " ".join(cmd))
    subprocess.run(cmd, check=True, cwd=work)
    return session


def pick_source(args: argparse.Namespace, work: Path) -> Path:
    if args.trace:
        return Path(args.trace)
    if args.source == "demo":
        return run_demo(work)
    fixture = sorted(FIXTURES.glob("kineto_nw0_*"))
    if fixture:
        print("using the real trace", fixture[0].name)
        return fixture[0]
    if args.source == "fixture":
        raise SystemExit(f"no kineto_nw0_* trace in {FIXTURES}")
    print("no kineto_nw0_* trace in", FIXTURES, "- running the demo",
          "(on the GPU)" if has_cuda() else "(CPU only)")
    return run_demo(work)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=("auto", "demo", "fixture"), default="auto")
    parser.add_argument("--trace", help="screenshot this trace or session instead")
    parser.add_argument("--out", default=str(HERE / "screenshot.png"))
    parser.add_argument("--size", default=SIZE)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="stallscope-shot-") as tmp:
        work = Path(tmp)
        source = pick_source(args, work)
        env = dict(os.environ, STALLSCOPE_CONFIG_DIR=str(work / "config"))
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
        cmd = [sys.executable, "-m", "stallscope.gui.app", "--screenshot", args.out,
               "--size", args.size, str(source)]
        done = subprocess.run(cmd, env=env)
        if done.returncode != 0:
            return done.returncode
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
