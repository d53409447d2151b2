"""Hardening III, SQLite (issue #39): a state.db is read through its real tables only, in one
ordered scan of its messages, streamed; duplicates found from ids alone; imports write in
short transactions, a locked database is a 503 with Retry-After, the WAL stays bounded."""

import pytest

from hermes_web.importers import hermes as hermes_reader
from hermes_web.importers import import_path
from hermes_web.models import Message, Session
from tests.web.hermes_state_db import add_session, empty_state_db

pytestmark = pytest.mark.django_db


def _with_view(path, view: str, body: str):
    """A state.db whose ``messages`` table is replaced by a view named ``view``."""
    db = empty_state_db(path, fts=False)
    add_session(db, "s1", None, 1.0, [("user", "hello"), ("assistant", "hi")])
    db.commit()
    db.executescript(
        f'ALTER TABLE messages RENAME TO real_messages;CREATE VIEW "{view}" AS {body};'
    )
    db.close()


# 2,000 copies of each real row: what the probe's 4 KB file stored as 68.7 MB.
_AMPLIFY = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) "
    "SELECT m.* FROM real_messages m, n"
)


@pytest.mark.parametrize("view", ["Messages", "MESSAGES", "mEsSaGeS"])
def test_a_view_under_a_case_variant_of_messages_is_refused_by_name(alice, tmp_path, view):
    path = tmp_path / "state.db"
    _with_view(path, view, _AMPLIFY)
    report = import_path(path, owner=alice)
    assert report.sessions == []
    assert str(report.errors[0]) == f"state.db: '{view}' is a view, not a table: refused"
    assert not Message.objects.exists()
    assert not Session.objects.exists()


def test_a_view_under_a_case_variant_of_sessions_is_refused(alice, tmp_path):
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    add_session(db, "s1", None, 1.0, [("user", "hello")])
    db.commit()
    db.executescript(
        "ALTER TABLE sessions RENAME TO real_sessions;"
        "CREATE VIEW Sessions AS SELECT * FROM real_sessions, (SELECT 1 UNION SELECT 2);"
    )
    db.close()
    report = import_path(path, owner=alice)
    assert report.sessions == []
    assert "'Sessions' is a view, not a table" in str(report.errors[0])


def test_a_recursive_view_is_refused_before_it_runs(alice, tmp_path, monkeypatch):
    # Were the view run, the reader would spin until its deadline: 2 s here, not 120.
    monkeypatch.setattr(hermes_reader, "READ_SECONDS", 2.0)
    path = tmp_path / "state.db"
    _with_view(
        path,
        "Messages",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
        "SELECT m.* FROM real_messages m, n",
    )
    report = import_path(path, owner=alice)
    assert report.sessions == []
    assert "'Messages' is a view, not a table" in str(report.errors[0])
    assert "reading took longer" not in str(report.errors[0])


def test_a_real_table_in_upper_case_is_read(alice, tmp_path):
    path = tmp_path / "state.db"
    db = empty_state_db(path, fts=False)
    add_session(db, "s1", None, 1.0, [("user", "hello"), ("assistant", "hi")])
    db.commit()
    db.execute("ALTER TABLE messages RENAME TO moved")
    db.execute("ALTER TABLE moved RENAME TO MESSAGES")
    db.close()
    report = import_path(path, owner=alice)
    assert report.refused == []
    assert [s.message_total for s in report.sessions] == [2]
