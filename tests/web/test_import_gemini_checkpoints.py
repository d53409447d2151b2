"""Gemini CLI ``/chat save`` checkpoints as real ones of mid-2025 (0.1.x) are written
(issue #25, nine public checkpoints): the ``functionCall`` parts carry no id while their
``functionResponse`` parts carry one the call never named, and the history opens with the
CLI's context turn (directory listing) and the model's "Got it". The results must answer
their calls (no stub, no orphan), and the context turn must be neither a user turn nor the
title."""

import pytest

from hermes_web.importers.formats import gemini_cli
from hermes_web.models import Message
from tests.web.agent_import_helpers import AGENTS, imported, parsed, wrapper_free

pytestmark = pytest.mark.django_db
CHECKPOINT = AGENTS / "gemini_cli" / "checkpoint-kvstore.json"
OPENINGS = ("This is the Gemini CLI.", "Okay, just setting up the context")


def test_responses_with_ids_of_their_own_answer_their_calls_in_order():
    (session,) = parsed(gemini_cli.parse, CHECKPOINT)
    calls = [c for m in session.messages if m.tool_calls for c in m.tool_calls]
    results = [m for m in session.messages if m.role == "tool"]
    assert [r.tool_call_id for r in results] == [c["id"] for c in calls]
    assert [r.meta for r in results] == ["", "", ""]  # none kept aside as an orphan
    assert results[1].content.startswith("--- FAIL: TestDeleteThenGet")
    assert results[2].content == "[Operation Cancelled] Reason: User did not allow tool call"
    assert not any("no result for this call" in str(m.content) for m in session.messages)


def test_the_context_turn_and_its_answer_are_meta_rows_not_the_title():
    (session,) = parsed(gemini_cli.parse, CHECKPOINT)
    context, answer = session.messages[:2]
    assert (context.role, context.meta) == ("user", "context")
    assert "/home/dev/kvstore/" in context.content
    assert (answer.role, answer.meta) == ("assistant", "context")
    assert session.title == "why does Get return stale values after Delete?"


def test_imported_with_format_auto_every_pair_whole(alice):
    (session,) = imported(CHECKPOINT, alice, "gemini-cli")
    wrapper_free([session], OPENINGS)
    active = Message.objects.filter(session=session, active=True)
    assert active.filter(role="tool").count() == 3
    assert active.first().content == "why does Get return stale values after Delete?"
