"""The recent list round-trips through its JSON file (the start screen's one-liner it stores is
core/render/tagline.py's, tested in test_tagline.py)."""

from __future__ import annotations

import json
from pathlib import Path

from stallscope.core import recent
from stallscope.core.recent import RecentStore


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


def test_a_multi_rank_session_is_remembered_as_a_session(tmp_path, config_dir):
    """Only events.rank0.jsonl at its top (a DDP run whose rank 0 had not written run.json):
    still a session, by core/session/reader.is_session, the one check."""
    session = tmp_path / "ddp"
    session.mkdir()
    (session / "events.rank0.jsonl").write_text("")
    plain = tmp_path / "plain"
    plain.mkdir()
    store = RecentStore()
    assert store.add(session).kind == "session"
    assert store.add(plain).kind == "trace"
    assert recent.item_kind(tmp_path / "bad\0name") == "trace"
