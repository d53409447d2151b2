"""A live Hermes ``state.db`` (issue #25 item 4, issue #28 item 2): the rows only in its
``state.db-wal`` are read, from a private copy, never writing beside the user's files; only
the columns of Hermes's schema are read, named one by one (an extra column, even a generated
one computing megabytes per row, is named in the fidelity report, never read)."""

import hashlib
import os
import sqlite3
import tempfile

import pytest

from hermes_web.importers import import_path
from hermes_web.models import Message, Session
from tests.web.hermes_state_db import add_session, empty_state_db

pytestmark = pytest.mark.django_db


def _snapshot(folder):
    return {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
        for name in sorted(os.listdir(folder))
    }


def _live_copy(tmp_path):
    """A folder holding what a running Hermes leaves: state.db with its newest session and
    message only in state.db-wal (not checkpointed), and the -shm."""
    work = tmp_path / "hermes"
    work.mkdir()
    path = work / "state.db"
    db = empty_state_db(path)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA wal_autocheckpoint = 0")
    add_session(db, "old", None, 1.0, [("user", "in the main file"), ("assistant", "yes")])
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    add_session(db, "new", None, 2.0, [("user", "only in the wal"), ("assistant", "newest")])
    db.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
        ("old", "user", "a later turn, only in the wal", 3.0),
    )
    db.commit()
    live = tmp_path / "live"
    live.mkdir()
    for name in ("state.db", "state.db-wal", "state.db-shm"):  # copied while Hermes runs
        (live / name).write_bytes((work / name).read_bytes())
    db.close()
    assert (live / "state.db-wal").stat().st_size > 0
    return live


def test_rows_only_in_the_wal_are_imported(alice, tmp_path):
    """Before: opened immutable, the database showed one session and two messages."""
    live = _live_copy(tmp_path)
    report = import_path(live / "state.db", owner=alice)
    assert report.refused == []
    assert report.warnings == []
    ids = sorted(s.extra["source_id"] for s in report.sessions)
    assert ids == ["new", "old"]
    old = Session.objects.get(public_id=f"old.{alice.pk}")
    assert list(Message.objects.filter(session=old).values_list("content", flat=True)) == [
        "in the main file",
        "yes",
        "a later turn, only in the wal",
    ]
    assert Message.objects.filter(content="newest").exists()


def test_the_live_folder_stays_byte_identical_with_no_new_file(alice, tmp_path, monkeypatch):
    live = _live_copy(tmp_path)
    private = tmp_path / "private-tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    before = _snapshot(live)
    live.chmod(0o555)  # nothing could be written here anyway
    try:
        report = import_path(live / "state.db", owner=alice)
    finally:
        live.chmod(0o755)
    assert len(report.sessions) == 2
    assert _snapshot(live) == before
    assert os.listdir(private) == []  # the private copy is gone too


def test_a_damaged_wal_is_ignored_as_sqlite_ignores_it(alice, tmp_path):
    """A -wal whose header is not a WAL's: SQLite applies none of it; the main file imports."""
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    add_session(db, "s1", None, 1.0, [("user", "in the main file")])
    db.commit()
    db.close()
    (tmp_path / "state.db-wal").write_bytes(b"\0" * 64)
    before = _snapshot(tmp_path)
    report = import_path(path, owner=alice)
    assert [s.extra["source_id"] for s in report.sessions] == ["s1"]
    assert report.refused == []
    assert _snapshot(tmp_path) == before


def test_a_wal_that_is_not_a_file_is_refused(alice, tmp_path):
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    add_session(db, "s1", None, 1.0, [("user", "hi")])
    db.commit()
    db.close()
    os.mkfifo(tmp_path / "state.db-wal")  # copying it would block
    report = import_path(path, owner=alice)
    assert "state.db-wal is not a regular file: refused" in report.errors[0].problem
    assert not report.sessions


def test_a_database_and_wal_over_the_limit_together_are_refused(alice, tmp_path, settings):
    live = _live_copy(tmp_path)
    size = (live / "state.db").stat().st_size
    settings.HERMES_MAX_UPLOAD_BYTES = size + 100  # the database alone would pass
    report = import_path(live / "state.db", owner=alice)
    assert "its state.db-wal are" in report.errors[0].problem
    assert not Session.objects.exists()


# --- issue #28.2: an explicit column list ---------------------------------------------------

BLOWUP_BYTES = 4_000_000


def test_an_extra_generated_column_is_named_and_never_read(alice, tmp_path):
    """Before: ``SELECT *`` computed the column and stored its 4 MB in each message's extra."""
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    add_session(db, "s1", None, 1.0, [("user", "hi"), ("assistant", "hello")])
    db.execute(
        "ALTER TABLE messages ADD COLUMN blowup TEXT GENERATED ALWAYS AS "
        f"(printf('%.*c', {BLOWUP_BYTES}, 'x')) VIRTUAL"
    )
    db.execute("ALTER TABLE sessions ADD COLUMN mystery TEXT")
    db.commit()
    db.close()
    report = import_path(path, owner=alice)
    assert report.refused == []
    (session,) = report.sessions
    for extra in Message.objects.filter(session=session).values_list("extra", flat=True):
        assert "blowup" not in (extra or {})
    stored = sum(
        len(str(row)) for row in Message.objects.filter(session=session).values_list("extra")
    )
    assert stored < 10_000
    skipped = session.extra["import_report"]["skipped"]
    assert skipped["messages.blowup: a generated column (not read)"] == 2
    assert skipped["sessions.mystery: a column not in Hermes's schema (not read)"] == 1


def test_a_generated_column_with_a_schema_name_is_not_read_either(alice, tmp_path):
    """Its expression would run on every read: a generated ``api_content`` is named, not read."""
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    db.executescript(
        "ALTER TABLE messages DROP COLUMN api_content;"
        "ALTER TABLE messages ADD COLUMN api_content TEXT GENERATED ALWAYS AS "
        f"(printf('%.*c', {BLOWUP_BYTES}, 'x')) VIRTUAL;"
    )
    add_session(db, "s1", None, 1.0, [("user", "hi"), ("assistant", "hello")])
    db.commit()
    db.close()
    (session,) = import_path(path, owner=alice).sessions
    assert not Message.objects.filter(session=session, extra__has_key="api_content").exists()
    skipped = session.extra["import_report"]["skipped"]
    assert skipped["messages.api_content: a generated column (not read)"] == 2


def test_prefixed_json_content_is_read_whole(alice, tmp_path):
    """Hermes stores lists as "\\x00json:" + JSON: read as stored, the parts come back."""
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    parts = '\x00json:[{"type": "text", "text": "see"}, {"type": "text", "text": "this"}]'
    add_session(db, "s1", None, 1.0, [("user", parts)])
    db.commit()
    db.close()
    (session,) = import_path(path, owner=alice).sessions
    assert Message.objects.get(session=session).content == [
        {"type": "text", "text": "see"},
        {"type": "text", "text": "this"},
    ]


def test_a_known_column_over_the_message_limit_refuses_its_session(alice, tmp_path, settings):
    settings.HERMES_MAX_MESSAGE_BYTES = 1000
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    add_session(db, "big", None, 1.0, [("user", "hi", {"api_content": "y" * 5000})])
    add_session(db, "fine", None, 2.0, [("user", "hello")])
    db.commit()
    db.close()
    report = import_path(path, owner=alice)
    assert [s.extra["source_id"] for s in report.sessions] == ["fine"]
    (problem,) = report.errors
    assert "message 1: column api_content is over the limit per message" in problem.problem
    assert problem.session == "big"


def test_the_schema_columns_are_still_read(alice, tmp_path):
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    add_session(
        db,
        "s1",
        None,
        1.0,
        [
            ("user", "hi"),
            (
                "assistant",
                "hello",
                {"finish_reason": "stop", "reasoning": "think", "token_count": 7},
            ),
        ],
    )
    db.execute("UPDATE sessions SET title = 'A title', cwd = '/home/me' WHERE id = 's1'")
    db.commit()
    db.close()
    (session,) = import_path(path, owner=alice).sessions
    assert session.title == "A title"
    assert session.extra["hermes"]["cwd"] == "/home/me"
    reply = Message.objects.get(session=session, role="assistant")
    assert reply.reasoning == "think"
    assert reply.extra["finish_reason"] == "stop"
    assert reply.extra["token_count"] == 7


def test_sqlite_can_compute_the_generated_column(tmp_path):
    """The generated column of the test above is real: SQLite computes it when asked."""
    db = sqlite3.connect(tmp_path / "x.db")
    db.execute("CREATE TABLE t (a INTEGER)")
    db.execute("ALTER TABLE t ADD COLUMN b TEXT GENERATED ALWAYS AS (printf('%.*c', 50, 'x'))")
    db.execute("INSERT INTO t (a) VALUES (1)")
    assert db.execute("SELECT b FROM t").fetchone()[0] == "x" * 50
