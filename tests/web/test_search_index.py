"""The search index follows every write path: chat, import, /v1, compaction commit (both
modes), undo and redo, edits, deletes of sessions and users, and the rebuild command.

After each write, the hits of a term are compared with a recomputation from the stored rows:
the messages of the user whose text holds the term, no more and no fewer."""

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from hermes_web.agent.loop import run_turn
from hermes_web.importers import import_path
from hermes_web.models import ApiKey, Message, Session
from hermes_web.services.chat import send_message, start_chat
from hermes_web.services.compactions import request_compaction, run_compaction
from hermes_web.services.search import parse_query, search
from hermes_web.services.search_index import TABLE, pending_count, sync
from hermes_web.services.sessions import append_message
from hermes_web.services.undo import redo_compaction, undo_compaction

pytestmark = pytest.mark.django_db

MESSAGE_KINDS = ["message", "tool_result", "summary"]


def hits(user, term, kinds=MESSAGE_KINDS):
    """The message rows (not compactions' texts) that ``term`` hits."""
    result = search(user, parse_query(f'"{term}"', kinds=kinds), limit=1000)
    return {(h.conversation, h.position) for h in result.hits if h.compaction is None}


def _text(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p if isinstance(p, str) else str(p.get("text", ""))
            for p in content
            if isinstance(p, str | dict)
        )
    return ""


def holding(user, term):
    """The (conversation, position) of every message of ``user`` whose text holds ``term``."""
    needle = term.casefold()
    return {
        (public_id, position)
        for public_id, position, content in Message.objects.filter(session__owner=user).values_list(
            "session__public_id", "position", "content"
        )
        if needle in _text(content).casefold()
    }


def assert_current(user, term, *, at_least=1):
    expected = holding(user, term)
    assert len(expected) >= at_least
    assert hits(user, term) == expected


def entries(**where):
    column, value = next(iter(where.items()))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {TABLE} WHERE {column} = %s", [value])
        return cursor.fetchone()[0]


def test_chat_rows_are_searchable_once_written(alice, llm):
    session = start_chat(owner=alice)
    turn = send_message(session=session, text="where is PLOVER-QUESTION-3 kept?")
    assert_current(alice, "PLOVER-QUESTION-3")
    llm.enqueue({"content": "It is in KESTREL-REPLY-9."})
    run_turn(turn.pk)
    assert_current(alice, "KESTREL-REPLY-9")


def test_imported_rows_are_searchable(alice, tmp_path):
    path = tmp_path / "chat.json"
    messages = [
        {"role": "user", "content": "read conf/IMPORT-HERON.yaml"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "read_file",
                        "arguments": json.dumps({"path": "conf/IMPORT-HERON.yaml"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "key: IMPORT-HERON-VALUE"},
        {"role": "assistant", "content": "done"},
    ]
    path.write_text(json.dumps({"title": "import", "messages": messages}))
    report = import_path(path, owner=alice)
    assert not report.errors
    session = report.sessions[0]
    assert_current(alice, "IMPORT-HERON-VALUE")
    assert hits(alice, "conf/IMPORT-HERON.yaml", kinds=["tool_call"]) == {(session.public_id, 1)}


@pytest.mark.django_db(transaction=True)
def test_v1_rows_are_searchable(alice, client, upstream):
    raw = ApiKey.issue(owner=alice, name="agent")[1]
    upstream.enqueue({"content": "GANNET-V1-REPLY"})
    response = client.post(
        "/v1/chat/completions",
        json.dumps(
            {
                "model": "openai/fake-chat",
                "messages": [{"role": "user", "content": "ask GANNET-V1-QUESTION"}],
            }
        ),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
    )
    assert response.status_code == 200, response.content
    assert_current(alice, "GANNET-V1-QUESTION")
    assert_current(alice, "GANNET-V1-REPLY")


def compacted(owner, mode):
    session = start_chat(owner=owner)
    Session.objects.filter(pk=session.pk).update(compaction_mode=mode)
    session.refresh_from_db()
    for i in range(12):
        append_message(
            session, role="user", content=f"question {i} TERN-{i}-MARK " + "words " * 1500
        )
        append_message(
            session,
            role="assistant",
            content=f"answer {i} " + "more " * 1500,
            provider_prompt_tokens=1000 * (i + 1),
        )
    run = run_compaction(request_compaction(session=session, requested_by=owner).pk)
    assert run.status == "committed", run.error
    return session, run


def a_fact(run):
    """A piece of a fact of ``run``'s ledger, short enough for a query."""
    facts = [f["text"] for group in run.report["ledger"]["facts"].values() for f in group]
    assert facts
    return min((f for f in facts if '"' not in f), key=len)[:60].strip()


@pytest.mark.parametrize("mode", ["in_place", "rotation"])
def test_a_compaction_commit_undo_and_redo_keep_the_index_current(alice, mode):
    session, run = compacted(alice, mode)
    # Originals (archived in place, or the ended parent) and the new rows (the summary, the
    # rotation child's copies of the kept tail) are all found.
    for i in (1, 6, 11):
        assert_current(alice, f"TERN-{i}-MARK")
    summary_rows = {
        (p, pos)
        for p, pos in Message.objects.filter(session__owner=alice, is_summary=True).values_list(
            "session__public_id", "position"
        )
    }
    assert summary_rows
    assert hits(alice, "CONTEXT COMPACTION", kinds=["summary"]) >= summary_rows
    # The report's summary and its fact ledger, linked to the compaction.
    report_hits = search(alice, parse_query('"CONTEXT COMPACTION"', kinds=["summary"])).hits
    assert run.public_id in {h.compaction for h in report_hits}
    ledger = search(alice, parse_query(f'"{a_fact(run)}"', kinds=["ledger"])).hits
    assert [h.compaction for h in ledger] == [run.public_id]

    run = undo_compaction(run, user=alice)
    for i in (1, 6, 11):
        assert_current(alice, f"TERN-{i}-MARK")
    run = redo_compaction(run, user=alice)
    for i in (1, 6, 11):
        assert_current(alice, f"TERN-{i}-MARK")


def test_an_edited_or_moved_row_is_found_by_its_new_text_only(alice):
    session = Session.objects.create(owner=alice)
    row = Message.objects.create(session=session, position=0, role="user", content="OLD-WREN")
    assert_current(alice, "OLD-WREN")  # indexed: the edit below must replace the entry
    Message.objects.filter(pk=row.pk).update(content=[{"type": "text", "text": "NEW-WREN"}])
    assert hits(alice, "OLD-WREN") == set()
    assert_current(alice, "NEW-WREN")
    Message.objects.filter(pk=row.pk).update(position=7)
    assert hits(alice, "NEW-WREN") == {(session.public_id, 7)}


def test_a_deleted_chat_leaves_nothing_in_the_index(alice, alice_client):
    session = start_chat(owner=alice)
    append_message(session, role="user", content="DELETED-SWIFT")
    session_pk = session.pk
    assert_current(alice, "DELETED-SWIFT")
    assert entries(session_id=session_pk) > 0
    response = alice_client.post(reverse("chat_delete", args=[session.public_id]))
    assert response.status_code in (200, 302)
    assert not Session.objects.filter(pk=session_pk).exists()
    assert hits(alice, "DELETED-SWIFT") == set()
    assert entries(session_id=session_pk) == 0


def test_a_deleted_user_leaves_nothing_in_the_index(alice):
    session, run = compacted(alice, "in_place")
    owner_id = alice.pk
    sync()
    assert entries(owner_id=owner_id) > 0
    alice.delete()
    assert pending_count() > 0  # the deletes were marked, in the deleting transaction
    sync()
    assert entries(owner_id=owner_id) == 0


def test_an_import_is_indexed_by_the_worker_task_it_queues(
    alice, tmp_path, django_capture_on_commit_callbacks
):
    from hermes_web.celery import app

    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "QUEUED-IBIS"}]}))
    # Marks other tests' committed writes left (a real worker's, a live server's) may wait too.
    before = pending_count()
    with django_capture_on_commit_callbacks(execute=False) as queued:
        import_path(path, owner=alice)
    assert pending_count() == before + 1
    assert entries(owner_id=alice.pk) == 0
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True  # the queued task runs inline, as a worker would run it
    try:
        for callback in queued:
            callback()
    finally:
        app.conf.task_always_eager = eager
    assert pending_count() == 0
    assert entries(owner_id=alice.pk) == 1


def test_the_rebuild_command_indexes_everything_again(alice):
    session, run = compacted(alice, "rotation")
    before = hits(alice, "TERN-3-MARK")
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE}")
    assert hits(alice, "TERN-3-MARK") == set()
    out = io.StringIO()
    call_command("rebuild_search_index", "--batch", "10", stdout=out)
    assert hits(alice, "TERN-3-MARK") == before
    assert_current(alice, "TERN-3-MARK")
    printed = out.getvalue()
    assert "messages: ids up to" in printed
    assert "compactions" in printed
    assert search(alice, parse_query(f'"{a_fact(run)}"', kinds=["ledger"])).hits


def test_every_trigger_of_the_index_exists_after_all_migrations():
    """A migration that remakes the message or compaction table on SQLite drops its triggers
    (0013 and 0016 did): after the last migration every one of them is there."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT tgname FROM pg_trigger WHERE tgname LIKE 'hermes_search_%'")
            expected = {
                "hermes_search_message",
                "hermes_search_compaction",
                "hermes_search_message_truncate",
                "hermes_search_compaction_truncate",
            }
        else:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            expected = {
                f"hermes_search_{table}_{event}"
                for table in ("message", "compaction")
                for event in ("insert", "update", "delete")
            }
        names = {row[0] for row in cursor.fetchall()}
    assert expected <= names, sorted(expected - names)
