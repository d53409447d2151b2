"""Undo with carry-over: the carried messages keep their order, a stopped (cancelled) reply
included, and the refusal describes the newest message in plain words, not cut raw Markdown."""

import pytest
from django.urls import reverse
from django.utils import timezone

from hermes_web.models import AgentTurn, Session
from hermes_web.services.chat import send_message, start_chat
from hermes_web.services.compactions import request_compaction, run_compaction
from hermes_web.services.sessions import append_message, openai_messages, resolve_tip
from hermes_web.services.undo import UndoRefused, undo_compaction
from tests.web.test_chat_undo import compacted

pytestmark = pytest.mark.django_db


def stopped_turn(session, text, partial):
    """A turn the person stopped mid-reply: their message and the reply so far, marked stopped."""
    turn = send_message(session=session, text=text)
    reply = append_message(
        session, role="assistant", content=partial, extra={"turn": turn.public_id, "stopped": True}
    )
    usage = {"message_ids": [reply.pk], "stopped": True}
    AgentTurn.objects.filter(pk=turn.pk).update(
        status="stopped", usage=usage, finished_at=timezone.now()
    )
    return turn


def answered_turn(session, text, answer):
    turn = send_message(session=session, text=text)
    reply = append_message(session, role="assistant", content=answer)
    AgentTurn.objects.filter(pk=turn.pk).update(
        status="done", usage={"message_ids": [reply.pk]}, finished_at=timezone.now()
    )
    return turn


@pytest.mark.parametrize("mode", ["in_place", "rotation"])
def test_carry_over_keeps_a_stopped_reply_where_it_was(alice, alice_client, mode):
    session, run, before = compacted(alice, mode)
    live = resolve_tip(Session.objects.get(pk=session.pk))
    answered_turn(live, "first after", "first answer")
    stopped_turn(live, "cancelled ask", "half a repl")
    answered_turn(live, "last after", "last answer")
    undo_compaction(run, user=alice, carry_over=True)
    restored = resolve_tip(Session.objects.get(pk=session.pk))
    tail = [m["content"] for m in openai_messages(restored)[len(before) :]]
    assert tail == [
        "first after",
        "first answer",
        "cancelled ask",
        "half a repl",
        "last after",
        "last answer",
    ]
    page = alice_client.get(reverse("chat_detail", args=[restored.public_id])).content.decode()
    where = [page.index(t) for t in tail]
    assert where == sorted(where), tail


@pytest.mark.parametrize("mode", ["in_place", "rotation"])
def test_a_stopped_turn_before_the_compaction_stays_before_the_carried_messages(
    alice, alice_client, mode
):
    """The chat shows an ended-badly last turn in its own box at the end; once an undo carried
    messages over after it, its rows stay in the transcript before them."""
    session = start_chat(owner=alice)
    Session.objects.filter(pk=session.pk).update(compaction_mode=mode)
    session.refresh_from_db()
    for i in range(12):
        answered_turn(session, f"question {i} " + "words " * 1500, f"answer {i} " + "more " * 1500)
    stopped_turn(session, "cancelled ask", "half a repl")
    run = run_compaction(request_compaction(session=session, requested_by=alice).pk)
    assert run.status == "committed", run.error
    answered_turn(resolve_tip(Session.objects.get(pk=session.pk)), "last after", "last answer")
    undo_compaction(run, user=alice, carry_over=True)
    restored = resolve_tip(Session.objects.get(pk=session.pk))
    tail = ["cancelled ask", "half a repl", "last after", "last answer"]
    assert [m["content"] for m in openai_messages(restored)][-4:] == tail
    page = alice_client.get(reverse("chat_detail", args=[restored.public_id])).content.decode()
    chat = page[page.index('id="transcript"') :]
    where = [chat.index(t) for t in tail]
    assert where == sorted(where), "the stopped turn moved after the carried messages"


def test_the_refusal_quotes_the_newest_message_as_words_not_raw_markdown(alice):
    session, run, _ = compacted(alice, "rotation")
    live = resolve_tip(Session.objects.get(pk=session.pk))
    append_message(
        live,
        role="user",
        content="**Fix** the `parser` in [utils.py](https://example.com/u) so that every "
        "single record of the nightly import is read exactly once",
    )
    with pytest.raises(UndoRefused) as refused:
        undo_compaction(run, user=alice)
    said = str(refused.value)
    assert "your message “Fix the parser in utils.py so that every single record of…”" in said
    for raw in ("**", "`", "](", "https://"):
        assert raw not in said
    append_message(
        live,
        role="assistant",
        content=None,
        tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        ],
    )
    with pytest.raises(UndoRefused, match="the newest: the reply calling read_file"):
        undo_compaction(run, user=alice)
