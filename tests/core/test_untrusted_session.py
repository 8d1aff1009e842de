"""A Dataset file from a received session is imported only in a child process
(core/session/factory_probe.py): whatever it does at import (trains forever, starts a child,
exits, fails, shadows a standard module) the app's process gets plain facts, in bounded time."""

from __future__ import annotations

import os
import textwrap
import time

import pytest

from stallscope.core.session.factory_probe import probe

DATASET = textwrap.dedent('''
    import os
    from pathlib import Path

    Path(__file__).with_name("imported-by").write_text(str(os.getpid()))


    class Flowers:
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return i


    def make_flowers():
        return Flowers()
''')


def _write(tmp_path, body: str, name: str = "data.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


@pytest.mark.runner  # the factory probe imports the file in a child process
def test_the_dataset_is_built_in_a_child_and_described(tmp_path):
    path = _write(tmp_path, DATASET)
    for name in ("Flowers", "make_flowers"):
        facts = probe(f"{path}:{name}")
        assert facts.ok and facts.kind == "Flowers" and facts.length == 5, facts
    assert int((tmp_path / "imported-by").read_text()) != os.getpid()
    assert facts.message == f"{path}:make_flowers: a Flowers of 5 samples (imported in a " \
                            "separate process)"


@pytest.mark.runner  # the factory probe imports the file in a child process
def test_a_file_that_trains_at_import_is_stopped_with_its_children(tmp_path):
    path = _write(tmp_path, '''
        import subprocess, sys, time
        from pathlib import Path
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        Path(__file__).with_name("child").write_text(str(child.pid))
        while True:  # the training loop, no __main__ guard
            time.sleep(0.1)
    ''')
    t = time.monotonic()
    facts = probe(f"{path}:Flowers", timeout=3)
    assert time.monotonic() - t < 10
    assert not facts.ok and "did not finish in 3 s" in facts.error
    assert 'if __name__ == "__main__":' in facts.error
    child = int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)  # the whole process group was ended


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("body, name, words", [
    ("import os\nos._exit(3)\n", "X", "the import ended without an answer (exit status 3)"),
    ("import sys\nsys.exit(4)\n", "X", "importing it failed: SystemExit: 4"),
    ("raise ValueError('no data here')\n", "X",
     "importing it failed: ValueError: no data here"),
    ("x = 1\n", "Nope", "has no 'Nope' at its top level"),
    ("def make():\n    return 3\n", "make",
     "make gave a int, not a map-style Dataset (needs __len__ and __getitem__)"),
    ("class D:\n    def __len__(self):\n        return -1\n    def __getitem__(self, i):\n"
     "        return i\n", "D", "len() of it failed: ValueError"),
])
@pytest.mark.runner  # the factory probe imports the file in a child process
def test_what_the_file_does_is_one_line(tmp_path, body, name, words):
    facts = probe(f"{_write(tmp_path, body)}:{name}", timeout=30)
    assert not facts.ok and words in facts.error, facts.error
    assert "\n" not in facts.message


@pytest.mark.runner  # the factory probe imports the file in a child process
def test_a_folder_that_shadows_the_standard_library_cannot_break_the_probe(tmp_path):
    _write(tmp_path, "raise RuntimeError('shadowed')\n", "json.py")
    _write(tmp_path, "raise RuntimeError('shadowed')\n", "signal.py")
    path = _write(tmp_path, DATASET)
    facts = probe(f"{path}:Flowers")
    assert facts.ok and facts.length == 5, facts


def test_no_file_no_probe(tmp_path):
    assert probe(f"{tmp_path / 'gone.py'}:X").error == "no such file"
    assert probe("no-colon").error == "expected file.py:name"
