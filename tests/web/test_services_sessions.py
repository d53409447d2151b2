"""services.sessions: creating, appending, reading and following rotation chains."""

import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from compaction import CompactionConfig, count_message_tokens
from hermes_web.models import Message, Session
from hermes_web.services.sessions import (
    append_message,
    append_messages,
    create_session,
    openai_messages,
    resolve_tip,
    session_tree,
)

pytestmark = pytest.mark.django_db


def test_create_session_is_its_own_root(alice):
    session = create_session(owner=alice, title="t", model="gpt-4o", context_length=64_000)
    session.refresh_from_db()
    assert session.root_id == session.pk
    assert session.context_length == 64_000
    assert session.source == Session.Source.CHAT


def test_create_session_rejects_unknown_mode(alice):
    with pytest.raises(ValueError, match="mode"):
        create_session(owner=alice, compaction_mode="sideways")


def test_append_counts_tokens_once_and_numbers_positions(alice):
    session = create_session(owner=alice, model="gpt-4o-mini")
    first = append_message(session, role="user", content="hello there")
    second = append_message(
        session,
        role="assistant",
        content=None,
        tool_calls=[
            {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        ],
    )
    third = append_message(
        session, role="tool", content="a.py", tool_call_id="call_1", tool_name="ls"
    )
    assert [first.position, second.position, third.position] == [0, 1, 2]
    expected = count_message_tokens(
        {"role": "user", "content": "hello there"}, CompactionConfig(model="gpt-4o-mini")
    )
    assert first.token_count == expected
    assert third.token_count > 0


def test_append_rejects_unknown_role(alice):
    session = create_session(owner=alice)
    with pytest.raises(ValueError, match="unknown role"):
        append_message(session, role="wizard", content="x")
    assert not session.messages.exists()


def test_append_touches_updated_at(alice):
    session = create_session(owner=alice)
    before = Session.objects.get(pk=session.pk).updated_at
    append_message(session, role="user", content="x")
    assert Session.objects.get(pk=session.pk).updated_at > before


def test_append_messages_stores_a_batch_at_consecutive_positions_in_one_insert(alice):
    session = create_session(owner=alice, model="gpt-4o-mini")
    append_message(session, role="user", content="start")
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    items = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": "a.py", "tool_call_id": "c1", "tool_name": "ls"},
        {"role": "assistant", "content": "done", "provider_prompt_tokens": 42, "extra": {"k": 1}},
    ]
    with CaptureQueriesContext(connection) as queries:
        rows = append_messages(session, items)
    inserts = [q for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 1
    assert [r.position for r in rows] == [1, 2, 3]
    stored = list(session.messages.order_by("position").values_list("role", "tool_name"))
    assert stored == [("user", ""), ("assistant", ""), ("tool", "ls"), ("assistant", "")]
    last = Message.objects.get(pk=rows[-1].pk)
    assert (last.provider_prompt_tokens, last.extra) == (42, {"k": 1})
    assert all(r.token_count > 0 for r in rows)


def test_append_messages_refuses_the_whole_batch_on_one_bad_item(alice):
    session = create_session(owner=alice)
    with pytest.raises(ValueError, match="unknown role"):
        append_messages(session, [{"role": "user", "content": "ok"}, {"role": "wizard"}])
    with pytest.raises(TypeError, match="unexpected"):
        append_messages(session, [{"role": "user", "content": "ok", "colour": "red"}])
    assert not session.messages.exists()


def test_append_messages_to_a_rotated_session_land_on_its_continuation(alice):
    root = create_session(owner=alice)
    child = Session.objects.create(owner=alice, parent=root, root=root)
    Session.objects.filter(pk=root.pk).update(end_reason="compression")
    rows = append_messages(
        root, [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    )
    assert {r.session_id for r in rows} == {child.pk}
    assert not root.messages.exists()


def test_openai_messages_skips_archived_rows(alice):
    session = create_session(owner=alice)
    append_message(session, role="user", content="old")
    append_message(session, role="user", content="new")
    Message.objects.filter(session=session, position=0).update(active=False, archived=True)
    assert openai_messages(session) == [{"role": "user", "content": "new"}]


def test_openai_messages_tool_shape(alice):
    session = create_session(owner=alice)
    calls = [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]
    append_message(session, role="assistant", content="", tool_calls=calls, reasoning="thinking")
    append_message(session, role="tool", content="ok", tool_call_id="c1", tool_name="read")
    assert openai_messages(session) == [
        {"role": "assistant", "content": "", "tool_calls": calls, "reasoning": "thinking"},
        {"role": "tool", "content": "ok", "tool_call_id": "c1", "name": "read"},
    ]


def test_resolve_tip_follows_rotation_children(alice):
    root = create_session(owner=alice)
    child = Session.objects.create(owner=alice, parent=root, root=root)
    grandchild = Session.objects.create(owner=alice, parent=child, root=root)
    Session.objects.filter(pk__in=[root.pk, child.pk]).update(
        end_reason=Session.EndReason.COMPRESSION
    )
    root.refresh_from_db()
    assert resolve_tip(root) == grandchild
    assert [s.pk for s in session_tree(grandchild)] == [root.pk, child.pk, grandchild.pk]


def test_resolve_tip_of_live_session_is_itself(alice):
    session = create_session(owner=alice)
    assert resolve_tip(session) == session


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_get_distinct_positions(alice):
    session = create_session(owner=alice)
    errors = []

    def writer(n):
        try:
            for i in range(10):
                append_message(session, role="user", content=f"w{n} m{i}")
        except Exception as error:  # surfaced by the assert below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    positions = list(session.messages.order_by("position").values_list("position", flat=True))
    assert positions == list(range(30))
