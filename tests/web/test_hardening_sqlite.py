"""Hardening III, SQLite (issue #39): a state.db is read through its real tables only, in one
ordered scan of its messages, streamed; duplicates found from ids alone; imports write in
short transactions, a locked database is a 503 with Retry-After, the WAL stays bounded."""

import contextlib
import sqlite3

import pytest

from hermes_web.importers import hermes as hermes_reader
from hermes_web.importers import import_path
from hermes_web.models import ApiKey, Message, Session
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


# --- a locked database is a 503 with Retry-After ----------------------------------------


@contextlib.contextmanager
def override_timeout(seconds: float):
    """This thread's next connections wait ``seconds`` for SQLite's write lock."""
    from django.db import connection

    options = connection.settings_dict["OPTIONS"]
    before = options.get("timeout")
    connection.close()
    options["timeout"] = seconds
    try:
        yield
    finally:
        options["timeout"] = before
        connection.close()


@pytest.fixture
def locked(monkeypatch):
    """Another process holds SQLite's write lock (a raw second connection to the same file)
    and this thread's connections give up after 0.1 s instead of 30."""
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's write lock")
    connection.close()
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "timeout", 0.1)
    holder = sqlite3.connect(connection.settings_dict["NAME"], timeout=5)
    holder.execute("BEGIN IMMEDIATE")
    yield holder
    holder.rollback()
    holder.close()
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_locked_database_is_a_json_503_with_retry_after_on_the_api(alice_client, locked):
    response = alice_client.post(
        "/api/sessions", data={"title": "new"}, content_type="application/json"
    )
    assert response.status_code == 503
    assert response["Retry-After"].isdigit()
    assert "busy" in response.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_a_locked_database_is_a_503_in_the_protocols_shape_on_v1(alice, upstream, client):
    raw = ApiKey.issue(owner=alice, name="agent")[1]
    from django.db import connection

    connection.close()  # the key is stored before the lock is taken
    holder = sqlite3.connect(connection.settings_dict["NAME"], timeout=5)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with override_timeout(0.1):
            body = {"model": "openai/fake-chat", "messages": [{"role": "user", "content": "hi"}]}
            chat = client.post(
                "/v1/chat/completions",
                data=body,
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {raw}",
            )
            anthropic = client.post(
                "/v1/messages",
                data={**body, "max_tokens": 10},
                content_type="application/json",
                HTTP_X_API_KEY=raw,
            )
    finally:
        holder.rollback()
        holder.close()
    assert chat.status_code == 503, chat.content
    assert chat["Retry-After"].isdigit()
    assert chat.json()["error"]["code"] == "database_busy"
    assert anthropic.status_code == 503, anthropic.content
    assert anthropic.json()["type"] == "error"
    assert anthropic["Retry-After"].isdigit()


@pytest.mark.django_db(transaction=True)
def test_a_locked_database_is_a_page_on_the_site(alice_client, locked):
    response = alice_client.post("/chat/new/", data={"message": "hello"})
    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html")
    assert b"The database is busy" in response.content
    assert response["Retry-After"].isdigit()
