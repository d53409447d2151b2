"""state.db as Hermes writes it, damaged, hostile or deep: read-only, plain tables only,
every parent link, chains without recursion, cycles refused by name (issues #14, #16)."""

import json
import os
import sqlite3
import sys

import pytest

from hermes_web.importers import import_path
from hermes_web.importers.formats import hermes as hermes_reader
from hermes_web.models import Message, Session
from hermes_web.services.sessions import openai_messages
from tests.web.hermes_state_db import add_session, damage_table_page, empty_state_db

# Longer than Python's recursion limit: a recursive walk of the chain would raise RecursionError.
DEEPER_THAN_RECURSION = sys.getrecursionlimit() + 200

pytestmark = pytest.mark.django_db


def _sid(tool_id, owner):
    return f"{tool_id}.{owner.pk}"


def test_session_meta_rows_are_metadata_and_every_parent_link_is_kept(alice, tmp_path):
    path = tmp_path / "state.db"
    db = empty_state_db(path)
    calls = json.dumps(
        [{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]
    )
    add_session(
        db,
        "s1",
        None,
        1.0,
        [
            ("session_meta", json.dumps({"model": "gpt-4o", "platform": "cli"})),
            ("user", "hello"),
            ("assistant", "", {"tool_calls": calls}),
            ("tool", "ok", {"tool_call_id": "c1", "tool_name": "terminal"}),
            ("assistant", "done", {"tool_calls": ""}),
        ],
    )
    add_session(db, "s2", "s1", 2.0, [("session_meta", "{}"), ("user", "more")])
    add_session(db, "s3", "s2", 3.0, [("user", "even more")])
    add_session(db, "s0", "s3", 0.5, [("user", "stored first, its parent comes later")])
    db.commit()
    db.close()
    report = import_path(path, owner=alice)
    assert report.refused == [], [str(p) for p in report.refused]
    s0, s1, s2, s3 = (
        Session.objects.get(public_id=_sid(i, alice)) for i in ("s0", "s1", "s2", "s3")
    )
    assert (s2.parent, s3.parent, s0.parent) == (s1, s2, s3)
    assert {s.root for s in (s0, s1, s2, s3)} == {s1}
    assert [s.compression_count for s in (s1, s2, s3, s0)] == [0, 1, 2, 3]
    assert [m["role"] for m in openai_messages(s1)] == ["user", "assistant", "tool", "assistant"]
    assert not Message.objects.filter(role="session_meta").exists()
    assert s1.extra["import_report"]["skipped"] == {
        "session_meta row (kept as session metadata)": 1
    }


def test_state_db_with_fts_triggers_is_opened_immutable_and_nothing_appears_beside_it(
    alice, tmp_path
):
    path = tmp_path / "state.db"
    db = empty_state_db(path)
    db.execute("PRAGMA journal_mode = WAL")
    add_session(db, "s1", None, 1.0, [("user", "hi"), ("assistant", "hello")])
    db.commit()
    db.close()
    for leftover in ("state.db-wal", "state.db-shm"):
        (tmp_path / leftover).unlink(missing_ok=True)
    path.chmod(0o444)
    tmp_path.chmod(0o555)  # not even a -wal could be created here
    try:
        before = path.read_bytes()
        report = import_path(path, owner=alice)
        assert report.refused == []
        assert len(report.sessions) == 1
        assert path.read_bytes() == before
        assert sorted(os.listdir(tmp_path)) == ["state.db"]
    finally:
        tmp_path.chmod(0o755)


def test_a_view_named_sessions_is_refused_without_running_it(alice, tmp_path):
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    db.executescript(
        "ALTER TABLE sessions RENAME TO real_sessions;"
        "CREATE VIEW sessions AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"
        " SELECT i AS id, NULL AS parent_session_id, i AS started_at FROM n;"
    )
    db.close()
    report = import_path(path, owner=alice)
    assert report.sessions == []
    assert "'sessions' is a view" in str(report.errors[0])


def test_a_trigger_that_runs_on_reads_is_refused(alice, tmp_path):
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    db.executescript(
        "CREATE VIEW v AS SELECT * FROM messages;"
        "CREATE TRIGGER odd INSTEAD OF INSERT ON v BEGIN SELECT 1; END;"
        "CREATE TRIGGER on_messages AFTER INSERT ON messages BEGIN SELECT 1; END;"
    )
    db.close()
    report = import_path(path, owner=alice)
    assert report.refused == []  # write triggers cannot fire on a read-only connection

    other = tmp_path / "other.db"
    db = empty_state_db(other, fts=False)
    db.execute("CREATE VIRTUAL TABLE messages_x USING fts5(a)")
    db.execute("DROP TABLE messages")
    db.execute("ALTER TABLE messages_x RENAME TO messages")
    db.close()
    report = import_path(other, owner=alice)
    assert "virtual table" in str(report.errors[0])


def test_cpu_is_bounded_by_the_progress_handler(alice, tmp_path, monkeypatch):
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    for i in range(30):
        add_session(db, f"s{i}", None, float(i), [("user", "x" * 50)] * 20)
    db.commit()
    db.close()
    monkeypatch.setattr(hermes_reader, "READ_SECONDS", -1.0)  # every query is over budget
    monkeypatch.setattr(hermes_reader, "_PROGRESS_STEPS", 1)
    report = import_path(path, owner=alice)
    assert report.sessions == []
    assert "reading took longer than" in str(report.errors[0])


def test_a_damaged_page_costs_only_the_sessions_on_it(alice, tmp_path):
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False, page_size=512)
    for i in range(12):  # long rows: a few per 512-byte leaf
        add_session(db, f"s{i:02d}", None, float(i), [("user", f"message of s{i:02d}")])
        db.execute("UPDATE sessions SET system_prompt = ? WHERE id = ?", ("p" * 300, f"s{i:02d}"))
    db.commit()
    db.close()
    damage_table_page(path, "sessions", leaf=1)
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(path).execute("SELECT * FROM sessions").fetchall()
    report = import_path(path, owner=alice)
    imported = sorted(s.extra["source_id"] for s in report.sessions)
    lost = [p for p in report.errors if p.problem.startswith("cannot read session ")]
    assert len(imported) >= 8
    assert lost
    assert len(imported) + len(lost) == 12
    assert "the sessions table is damaged" in str(report.errors[0])


def test_a_chain_deeper_than_the_recursion_limit_imports_and_links(alice, tmp_path):
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    depth = DEEPER_THAN_RECURSION
    for i in range(depth):
        add_session(db, f"c{i:04d}", f"c{i - 1:04d}" if i else None, float(i), [("user", "hi")])
    db.commit()
    db.close()
    report = import_path(path, owner=alice)
    assert report.refused == []
    assert len(report.sessions) == depth
    tip = Session.objects.get(public_id=_sid(f"c{depth - 1:04d}", alice))
    root = Session.objects.get(public_id=_sid("c0000", alice))
    assert tip.root == root
    assert tip.compression_count == depth - 1
    assert Session.objects.filter(root=root).count() == depth


def test_a_chain_deeper_than_the_recursion_limit_stored_tip_first_links(alice, tmp_path):
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    depth = DEEPER_THAN_RECURSION
    for i in range(depth):  # children start before their parents: every link waits
        add_session(db, f"c{i:04d}", f"c{i - 1:04d}" if i else None, float(-i), [("user", "hi")])
    db.commit()
    db.close()
    report = import_path(path, owner=alice)
    assert report.refused == []
    tip = Session.objects.get(public_id=_sid(f"c{depth - 1:04d}", alice))
    assert tip.root.public_id == _sid("c0000", alice)
    assert tip.compression_count == depth - 1


def test_a_parent_cycle_is_refused_naming_the_ids(alice, tmp_path):
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    add_session(db, "a", "c", 1.0, [("user", "a")])
    add_session(db, "b", "a", 2.0, [("user", "b")])
    add_session(db, "c", "b", 3.0, [("user", "c")])
    add_session(db, "d", None, 4.0, [("user", "d")])
    db.commit()
    db.close()
    report = import_path(path, owner=alice)
    assert sorted(s.extra["source_id"] for s in report.sessions) == ["a", "b", "d"]
    (problem,) = report.errors
    assert "parent cycle: c → b → a → c" in problem.problem
    assert problem.session == "c"
    assert problem.file == "state.db"
    assert not Session.objects.filter(extra__source_id="c").exists()
    assert not Message.objects.filter(content="c").exists()
    # a re-import stores nothing twice and still refuses the cycle
    again = import_path(path, owner=alice, skip_existing=True)
    assert len(again.skipped) == 3
    assert "parent cycle" in again.errors[0].problem
