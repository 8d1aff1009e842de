"""The recent list round-trips through its JSON file; headline() speaks the report's numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from fixture_traces import fixture_path

from stallscope.core import recent
from stallscope.core.causes import BY_CODE
from stallscope.core.recent import RecentStore
from stallscope.core.render.headline import headline


def test_config_dir_follows_env_then_xdg(tmp_path, monkeypatch):
    assert recent.config_dir() == tmp_path / "config"
    monkeypatch.delenv("STALLSCOPE_CONFIG_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    if recent.sys.platform.startswith("linux"):
        assert recent.config_dir() == tmp_path / "xdg" / "stallscope"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")
    if recent.sys.platform.startswith("linux"):
        assert recent.config_dir() == Path.home() / ".config" / "stallscope"


def test_add_writes_json_newest_first_and_dedupes(tmp_path, config_dir):
    trace = tmp_path / "a.pt.trace.json.gz"
    trace.write_bytes(b"x")
    session = tmp_path / "sess"
    session.mkdir()
    (session / "run.json").write_text("{}")

    store = RecentStore()
    store.add(trace, headline="GPU idle 44%, mostly data loading", opened=100.0)
    store.add(session, opened=200.0)
    store.add(trace, opened=300.0)  # reopened: moves first, keeps its headline

    on_disk = json.loads((config_dir / "recent.json").read_text())
    assert [e["path"] for e in on_disk["items"]] == [str(trace), str(session)]

    items = RecentStore().items()  # a fresh store reads the same file
    assert [it.path for it in items] == [str(trace), str(session)]
    assert [it.kind for it in items] == ["trace", "session"]
    assert items[0].headline == "GPU idle 44%, mostly data loading"
    assert items[0].opened == 300.0
    assert items[1].name == "sess"
    assert all(it.exists for it in items)


def test_cap_remove_set_headline_clear(tmp_path):
    store = RecentStore(max_items=3)
    for i in range(5):
        store.add(tmp_path / f"t{i}.json", opened=float(i))
    assert [Path(it.path).name for it in store.items()] == ["t4.json", "t3.json", "t2.json"]
    assert store.set_headline(tmp_path / "t3.json", "GPU busy 98%")
    assert store.items()[1].headline == "GPU busy 98%"
    assert not store.set_headline(tmp_path / "t0.json", "gone")
    assert store.remove(tmp_path / "t4.json")
    assert not store.remove(tmp_path / "t4.json")
    assert [Path(it.path).name for it in store.items()] == ["t3.json", "t2.json"]
    assert not store.items()[0].exists
    store.clear()
    assert store.items() == []


def test_unreadable_file_is_set_aside_not_lost(config_dir):
    config_dir.mkdir(parents=True)
    (config_dir / "recent.json").write_text("{not json")
    store = RecentStore()
    assert store.items() == []
    assert (config_dir / "recent.json.unreadable").read_text() == "{not json"
    store.add("/x/y.json", opened=1.0)
    assert [it.path for it in store.items()] == [str(Path("/x/y.json").absolute())]


def test_bad_entries_are_skipped(config_dir):
    config_dir.mkdir(parents=True)
    (config_dir / "recent.json").write_text(
        json.dumps({"items": [{"path": 3}, "junk", {"path": "/a", "kind": "odd", "opened": "x"}]})
    )
    (item,) = RecentStore().items()
    assert (item.path, item.kind, item.opened, item.headline) == ("/a", "trace", 0.0, "")


def _stats(busy, idle, causes):
    return SimpleNamespace(busy_us=busy, idle_us=idle, idle_by_cause=causes)


def test_headline_wording_from_numbers():
    one = SimpleNamespace(
        window=(0.0, 1000.0), steps=[],
        devices={"0": _stats(560.0, 440.0, {"data_loading": 300.0, "cpu_ops": 140.0})},
    )
    assert headline(one) == "GPU idle 44%, mostly data loading"

    split = SimpleNamespace(
        window=(0.0, 1000.0), steps=[],
        devices={"0": _stats(600.0, 400.0, {"sync": 150.0, "cpu_ops": 130.0, "uncovered": 120.0})},
    )
    assert headline(split) == "GPU idle 40%, largest cause CPU-GPU syncs (38% of it)"

    multi = SimpleNamespace(
        window=(0.0, 1000.0), steps=[],
        devices={"0": _stats(900.0, 100.0, {"optimizer": 100.0}),
                 "3": _stats(300.0, 700.0, {"cpu_ops": 700.0})},
    )
    assert headline(multi) == "GPU 3 (worst of 2) idle 70%, mostly CPU-side ops"

    busy = SimpleNamespace(window=(0, 1000), steps=[], devices={"0": _stats(980.0, 20.0, {})})
    assert headline(busy) == "GPU busy 98%, no idle time worth chasing"

    step = SimpleNamespace(dur_us=100.0, data_loading_us=2.0)
    cpu = SimpleNamespace(window=(0.0, 2.5e6), steps=[step] * 3, devices={})
    assert headline(cpu) == "No GPU in trace (CPU only), 3 steps over 2.50 s"
    starved = SimpleNamespace(dur_us=100.0, data_loading_us=78.0)
    cpu = SimpleNamespace(window=(0.0, 300.0), steps=[starved, step], devices={})
    assert headline(cpu) == "No GPU in trace; steps wait on data loading 40% of the time"


def test_headline_of_a_real_trace():
    from stallscope.core.analysis import analyze
    from stallscope.core.trace import load

    report = analyze(load(fixture_path("kineto_nw0")))
    text = headline(report)
    (dev, stats), *_ = report.devices.items()
    idle_pct = round(100 * stats.idle_us / (stats.busy_us + stats.idle_us))
    m = re.match(r"GPU idle (\d+)%", text)
    assert m, text
    assert int(m.group(1)) == idle_pct
    top = max(stats.idle_by_cause, key=stats.idle_by_cause.get)
    assert BY_CODE[top].phrase in text
