"""The typing ratchet: core/ is checked with strict settings ([tool.mypy.overrides] for
stallscope.core.* in pyproject.toml) except the modules listed under RATCHET there, which are
not clean yet. This runs mypy once more with the strict settings on every core module and
fails when a listed module has become clean (remove it from the list: the list only shrinks),
or when a module outside the list fails (the normal type check says so too).

    python .ci/ratchet.py          # from the repository root, after .ci/typecheck's links
    python .ci/ratchet.py --list   # the modules that are not clean, as the list to paste
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STRICT = ("disallow_untyped_defs", "disallow_incomplete_defs", "warn_return_any",
          "no_implicit_optional")
LINK = "build/typecheck/stallscope/"


def listed(config: dict) -> list[str]:
    """The modules the ratchet exempts (the override that turns the strict settings off)."""
    for section in config["tool"]["mypy"].get("overrides", []):
        if section.get("disallow_untyped_defs") is False:
            return list(section["module"])
    return []


def failing_modules() -> set[str]:
    """Every core module with an error under the strict settings and no exemption."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mypy = dict(config["tool"]["mypy"])
    overrides = [o for o in mypy.pop("overrides", []) if o.get("disallow_untyped_defs") is not
                 False]
    mypy["cache_dir"] = "build/mypy_cache_ratchet"  # its settings differ: a cache of its own
    lines = ["[mypy]"] + [f"{k} = {_ini(v)}" for k, v in mypy.items()]
    for o in overrides:
        lines.append(f"[mypy-{','.join(o['module'])}]")
        lines += [f"{k} = {_ini(v)}" for k, v in o.items() if k != "module"]
    with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as f:
        f.write("\n".join(lines).replace("$MYPY_CONFIG_FILE_DIR", str(ROOT)) + "\n")
    mypy_bin = os.environ.get("MYPY", str(ROOT / ".venv/bin/mypy"))
    done = subprocess.run([mypy_bin, "--config-file", f.name], cwd=ROOT, capture_output=True,
                          text=True)
    out = done.stdout
    if done.returncode not in (0, 1) or "error:" not in out and done.returncode:
        raise SystemExit(f"ratchet: mypy did not run: {done.stderr.strip() or out.strip()}")
    os.unlink(f.name)
    found = set()
    for line in out.splitlines():
        m = re.match(rf"{re.escape(LINK)}(core/[\w/]+)\.py:\d+: error", line)
        if m:
            found.add("stallscope." + m.group(1).replace("/", ".").removesuffix(".__init__"))
    return found


def _ini(value) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, list):
        return ", ".join(value)
    return str(value)


def main(argv: list[str]) -> int:
    failing = failing_modules()
    if "--list" in argv:
        print("\n".join(f'    "{m}",' for m in sorted(failing)))
        return 0
    exempt = set(listed(tomllib.loads((ROOT / "pyproject.toml").read_text())))
    clean = sorted(exempt - failing)
    new = sorted(failing - exempt)
    for m in clean:
        print(f"ratchet: {m} is clean under the strict settings: remove it from the list in "
              "pyproject.toml")
    for m in new:
        print(f"ratchet: {m} has strict-mode errors and is not on the list: fix them")
    print(f"ratchet: {len(exempt)} core modules still exempt")
    return 1 if clean or new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
