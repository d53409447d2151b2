"""An import's small sessions share a transaction (importers/groups.py): each session in its
own savepoint, so a bad one is refused alone and the others are stored whole; the group
commits often enough that other writers get in between."""

import os
import threading

import pytest
from django.db import connection
from django.test import Client

from hermes_web.importers import import_path
from hermes_web.models import Message, Session
from tests.web.hermes_state_db import add_session, empty_state_db

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="SQLite's transactions and writer lock: the embedded default's",
    ),
    pytest.mark.django_db(transaction=True),
]


def _state_db(path, sessions: int, parents: dict[str, str] | None = None):
    """``sessions`` sessions s000… of two messages each; ``parents``: child id → parent id."""
    db = empty_state_db(path, fts=False)
    parents = parents or {}
    for i in range(sessions):
        sid = f"s{i:03d}"
        add_session(
            db,
            sid,
            parents.get(sid),
            float(i),
            [("user", f"{sid} ask"), ("assistant", f"{sid} ok")],
        )
    db.commit()
    db.close()
    return path


def _begins(run):
    """``run()``'s result, and the transactions it began."""
    begun = 0

    def watch(execute, sql, params, many, context):
        nonlocal begun
        begun += sql.startswith("BEGIN")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch):
        result = run()
    return result, begun


def test_a_bad_session_in_the_middle_of_a_group_is_refused_alone(alice, tmp_path, settings):
    # One group for the whole file; s021 closes a parent cycle (s020 ↔ s021), which is found
    # after its row and messages are written: only its savepoint rolls back.
    settings.HERMES_IMPORT_GROUP_SESSIONS = 1000
    settings.HERMES_IMPORT_GROUP_MS = 600_000
    path = _state_db(tmp_path / "state.db", 40, parents={"s020": "s021", "s021": "s020"})
    report, begun = _begins(lambda: import_path(path, owner=alice))
    assert begun < 5  # not one transaction per session
    (problem,) = report.errors
    assert problem.session == "s021"
    assert "parent cycle" in problem.problem
    assert len(report.sessions) == 39
    stored = {
        s.extra["source_id"]: s
        for s in Session.objects.filter(owner=alice, source__startswith="import:")
    }
    assert sorted(stored) == [f"s{i:03d}" for i in range(40) if i != 21]
    for sid, session in stored.items():
        contents = list(
            Message.objects.filter(session=session)
            .order_by("position")
            .values_list("content", flat=True)
        )
        assert contents == [f"{sid} ask", f"{sid} ok"]
    assert Message.objects.count() == 78
    assert not Message.objects.filter(content__startswith="s021").exists()


def test_a_group_commits_at_its_session_limit(alice, tmp_path, settings):
    settings.HERMES_IMPORT_GROUP_SESSIONS = 10
    settings.HERMES_IMPORT_GROUP_MS = 600_000
    path = _state_db(tmp_path / "state.db", 35)
    report, begun = _begins(lambda: import_path(path, owner=alice))
    assert report.errors.total == 0
    assert len(report.sessions) == 35
    assert 4 <= begun <= 6  # 10 + 10 + 10 + 5, and maybe the links' own


def test_other_writers_get_in_between_the_groups_of_a_large_import(alice, tmp_path):
    # With the defaults (a group commits within 250 ms of its first write), another user's
    # writes land between the import's sessions, not only before or after all of them.
    path = _state_db(tmp_path / "state.db", 1500)
    other = Client()
    other.force_login(alice)
    answers: list = []
    started, done = threading.Event(), threading.Event()

    def write_meanwhile():
        try:
            started.set()
            while not done.is_set():
                response = other.post(
                    "/api/sessions", data={"title": "meanwhile"}, content_type="application/json"
                )
                answers.append((response.status_code, response.get("Retry-After")))
        finally:
            connection.close()

    writer = threading.Thread(target=write_meanwhile)
    writer.start()
    started.wait()
    try:
        report = import_path(path, owner=alice)
    finally:
        done.set()
        writer.join()
    assert report.errors.total == 0
    assert len(report.sessions) == 1500
    assert all(status == 201 or (status == 503 and after) for status, after in answers), answers
    imported = [s.pk for s in report.sessions]
    meanwhile = Session.objects.filter(title="meanwhile").values_list("pk", flat=True)
    assert any(min(imported) < pk < max(imported) for pk in meanwhile)
