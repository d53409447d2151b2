"""Crush sessions (issue #36 item 1): ``.crush/crush.db`` identified by its tables (before:
refused as "not a Hermes state.db: table 'sessions' lacks started_at"), its rows in the -wal
read from a private copy, tool calls paired with their results, reasoning kept, the message
``sessions.summary_message_id`` names as Crush's own compaction, a sub-agent session linked
to its parent.

Fixtures are our own, built with the schema Crush's migrations create."""

import json
import sqlite3

import pytest

from hermes_web.importers import detect_format, import_path
from hermes_web.models import Compaction, Message, Session

pytestmark = pytest.mark.django_db

SCHEMA = """
CREATE TABLE goose_db_version (id INTEGER PRIMARY KEY AUTOINCREMENT, version_id INTEGER NOT NULL,
  is_applied INTEGER NOT NULL, tstamp TIMESTAMP DEFAULT (datetime('now')));
CREATE TABLE sessions (id TEXT PRIMARY KEY, parent_session_id TEXT, title TEXT NOT NULL,
  message_count INTEGER NOT NULL DEFAULT 0, prompt_tokens INTEGER NOT NULL DEFAULT 0,
  completion_tokens INTEGER NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0.0,
  updated_at INTEGER NOT NULL, created_at INTEGER NOT NULL, summary_message_id TEXT);
CREATE TABLE files (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, path TEXT NOT NULL,
  content TEXT NOT NULL, version INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL);
CREATE TABLE messages (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL,
  parts TEXT NOT NULL default '[]', model TEXT, created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL, finished_at INTEGER, provider TEXT);
"""
T0 = 1_754_605_244


def text(value):
    return {"type": "text", "data": {"text": value}}


def finish(reason):
    return {"type": "finish", "data": {"reason": reason, "time": T0}}


def call(call_id, name, args):
    data = {"id": call_id, "name": name, "input": json.dumps(args), "finished": True}
    return {"type": "tool_call", "data": data}


def result(call_id, content, error=False):
    data = {"tool_call_id": call_id, "name": "", "content": content, "is_error": error}
    return {"type": "tool_result", "data": data}


def build(path, *, wal=False):
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    if wal:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA wal_autocheckpoint = 0")
        db.commit()
    rows = []

    def message(sid, role, parts):
        rows.append((f"m{len(rows) + 1}", sid, role, json.dumps(parts), T0 + len(rows)))
        return rows[-1][0]

    message("s1", "user", [text("why does kitty not load?"), finish("stop")])
    message(
        "s1",
        "assistant",
        [
            {"type": "reasoning", "data": {"thinking": "Check the config path."}},
            text("Looking."),
            call("call_a", "ls", {"path": "~/.config"}),
            call("call_b", "view", {"file_path": "kitty.conf"}),
            finish("tool_use"),
        ],
    )
    message(
        "s1", "tool", [result("call_a", "kitty/\nnvim/"), result("call_b", "no such file", True)]
    )
    message("s1", "assistant", [text("The file is missing."), finish("end_turn")])
    summary = message(
        "s1", "assistant", [text("Summary: kitty.conf is missing."), finish("end_turn")]
    )
    message("s1", "user", [text("create it"), finish("stop")])
    message("s1", "assistant", [call("call_c", "agent", {"prompt": "write kitty.conf"})])
    message("s1", "tool", [result("call_c", "written")])
    message("m7$$call_c", "user", [text("write kitty.conf")])
    message("m7$$call_c", "assistant", [text("written")])
    db.execute(
        "INSERT INTO sessions VALUES ('s1', NULL, 'Kitty config', 8, 15821, 14, 0.01, ?, ?, ?)",
        (T0, T0, summary),
    )
    db.execute(
        "INSERT INTO sessions VALUES ('m7$$call_c', 's1', 'write kitty.conf', 2, 10, 1, 0, ?, ?, NULL)",
        (T0 + 1, T0 + 1),
    )
    db.executemany(
        "INSERT INTO messages (id, session_id, role, parts, model, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, 'gpt-4.1', ?, ?)",
        [(*r, r[-1]) for r in rows],
    )
    db.execute(
        "INSERT INTO files VALUES ('f1', 's1', 'kitty.conf', 'font_size 12', 0, ?, ?)", (T0, T0)
    )
    db.commit()
    return db


def _rows(session):
    return list(Message.objects.filter(session=session).order_by("position"))


def test_a_crush_db_is_found_by_its_tables_and_imports(alice, tmp_path):
    """Before: "not a Hermes state.db: table 'sessions' lacks started_at"."""
    path = tmp_path / "crush.db"
    build(path).close()
    assert detect_format(path, "crush.db") == "crush"
    report = import_path(path, owner=alice)
    assert report.refused == [], report.errors
    main = Session.objects.get(public_id=f"s1.{alice.pk}")
    assert main.source == Session.Source.IMPORT_CRUSH
    assert main.title == "Kitty config"
    rows = _rows(main)
    turn = next(r for r in rows if r.role == "assistant")
    assert turn.content == "Looking."
    assert turn.reasoning == "Check the config path."
    assert [c["id"] for c in turn.tool_calls] == ["call_a", "call_b"]
    results = {r.tool_call_id: r for r in rows if r.role == "tool"}
    assert results["call_a"].content == "kitty/\nnvim/"
    assert results["call_b"].extra.get("is_error") is True
    assert results["call_c"].content == "written"
    assert all("font_size" not in json.dumps(r.content) for r in Message.objects.all())


def test_the_summary_message_is_crushs_own_compaction(alice, tmp_path):
    path = tmp_path / "crush.db"
    build(path).close()
    import_path(path, owner=alice)
    main = Session.objects.get(public_id=f"s1.{alice.pk}")
    compaction = Compaction.objects.get(session=main)
    assert compaction.source == "crush"
    assert compaction.native_summary == "Summary: kitty.conf is missing."
    rows = _rows(main)
    summary = next(r for r in rows if r.is_summary)
    before = [r for r in rows if r.position < summary.position and not r.is_summary]
    assert before
    assert all(r.archived for r in before)
    after = next(r for r in rows if r.content == "create it")
    assert after.active
    assert after.position > summary.position


def test_a_sub_agent_session_is_linked_to_its_parent(alice, tmp_path):
    path = tmp_path / "crush.db"
    build(path).close()
    import_path(path, owner=alice)
    main = Session.objects.get(public_id=f"s1.{alice.pk}")
    child = Session.objects.exclude(pk=main.pk).get()
    assert child.parent_id == main.pk
    assert child.title == "write kitty.conf"
    assert [r.content for r in _rows(child)] == ["write kitty.conf", "written"]


def test_rows_only_in_the_wal_are_read(alice, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    db = build(work / "crush.db", wal=True)
    live = tmp_path / "live"
    live.mkdir()
    for name in ("crush.db", "crush.db-wal", "crush.db-shm"):
        (live / name).write_bytes((work / name).read_bytes())
    db.close()
    assert (live / "crush.db-wal").stat().st_size > 0
    report = import_path(live / "crush.db", owner=alice)
    assert report.format == "crush"
    assert report.refused == [], report.errors
    assert Session.objects.filter(public_id=f"s1.{alice.pk}").exists()
    assert sorted(p.name for p in live.iterdir()) == ["crush.db", "crush.db-shm", "crush.db-wal"]
