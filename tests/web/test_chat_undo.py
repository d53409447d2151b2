"""Undo and redo of a committed compaction, both modes: the exact context comes back, the
undo is recorded, later messages refuse it unless carried over, and the chat offers it."""

import pytest
from django.urls import reverse

from hermes_web.models import Compaction, Message, Session
from hermes_web.services.chat import start_chat
from hermes_web.services.compactions import request_compaction, run_compaction
from hermes_web.services.sessions import append_message, openai_messages, resolve_tip
from hermes_web.services.undo import UndoRefused, redo_compaction, undo_compaction, undo_state

pytestmark = pytest.mark.django_db


def compacted(owner, mode):
    session = start_chat(owner=owner)
    Session.objects.filter(pk=session.pk).update(compaction_mode=mode)
    session.refresh_from_db()
    for i in range(12):
        append_message(session, role="user", content=f"question {i} " + "words " * 1500)
        append_message(
            session,
            role="assistant",
            content=f"answer {i} " + "more " * 1500,
            provider_prompt_tokens=1000 * (i + 1),
        )
    before = openai_messages(session)
    run = run_compaction(request_compaction(session=session, requested_by=owner).pk)
    assert run.status == "committed", run.error
    return session, run, before


@pytest.mark.parametrize("mode", ["in_place", "rotation"])
def test_undo_restores_the_exact_context_and_redo_applies_it_again(alice, mode):
    session, run, before = compacted(alice, mode)
    live = resolve_tip(Session.objects.get(pk=session.pk))
    after = openai_messages(live)
    assert after != before

    run = undo_compaction(run, user=alice)
    assert run.status == Compaction.Status.UNDONE
    live = resolve_tip(Session.objects.get(pk=session.pk))
    assert live.pk == session.pk
    assert openai_messages(live) == before
    assert [h["action"] for h in run.report["undo"]["history"]] == ["undo"]
    assert run.report["undo"]["history"][0]["by"] == "alice"
    if mode == "rotation":
        child = Session.objects.get(pk=run.result_session_id)
        assert child.end_reason == "undone"
        assert child.ended_at is not None
    else:
        assert Session.objects.get(pk=session.pk).compression_count == 0
        assert not Message.objects.filter(session=session, active=True, is_summary=True).exists()

    run = redo_compaction(run, user=alice)
    assert run.status == Compaction.Status.COMMITTED
    live = resolve_tip(Session.objects.get(pk=session.pk))
    assert openai_messages(live) == after
    assert [h["action"] for h in run.report["undo"]["history"]] == ["undo", "redo"]
    # Nothing was deleted along the way.
    assert Message.objects.filter(session=session).count() >= len(before)


@pytest.mark.parametrize("mode", ["in_place", "rotation"])
def test_messages_added_after_refuse_the_undo_unless_carried_over(alice, mode):
    session, run, before = compacted(alice, mode)
    live = resolve_tip(Session.objects.get(pk=session.pk))
    append_message(live, role="user", content="a question asked after the compaction")
    with pytest.raises(UndoRefused) as refused:
        undo_compaction(run, user=alice)
    assert "1 message was added after this compaction" in str(refused.value)
    assert "a question asked after the compaction" in str(refused.value)
    assert refused.value.added == 1
    state = undo_state(Compaction.objects.get(pk=run.pk))
    assert state["action"] == "undo"
    assert state["added"] == 1
    run = undo_compaction(run, user=alice, carry_over=True)
    restored = openai_messages(resolve_tip(Session.objects.get(pk=session.pk)))
    assert restored == [
        *before,
        {"role": "user", "content": "a question asked after the compaction"},
    ]
    assert run.report["undo"]["history"][-1]["carried_messages"] == 1


def test_a_later_compaction_must_be_undone_first(alice):
    session, first, _ = compacted(alice, "in_place")
    for i in range(12):
        append_message(session, role="user", content=f"more {i} " + "words " * 1500)
        append_message(session, role="assistant", content=f"reply {i} " + "more " * 1500)
    second = run_compaction(request_compaction(session=session, requested_by=alice).pk)
    assert second.status == "committed", second.error
    with pytest.raises(UndoRefused, match="A later compaction"):
        undo_compaction(first, user=alice)
    undo_compaction(second, user=alice)
    # The 24 messages written between the two compactions need carrying over.
    with pytest.raises(UndoRefused, match="24 messages were added"):
        undo_compaction(Compaction.objects.get(pk=first.pk), user=alice)
    undo_compaction(Compaction.objects.get(pk=first.pk), user=alice, carry_over=True)
    assert len(openai_messages(session)) == 1 + 24 + 24


def test_a_skipped_run_cannot_be_undone(alice):
    session = start_chat(owner=alice)
    run = run_compaction(request_compaction(session=session, requested_by=alice).pk)
    assert run.status == "skipped"
    with pytest.raises(UndoRefused, match="Only a committed compaction can be undone"):
        undo_compaction(run, user=alice)


def test_the_chat_marker_undoes_and_the_status_row_redoes(alice, alice_client, bob_client):
    session, run, before = compacted(alice, "rotation")
    child = Session.objects.get(pk=run.result_session_id)
    page = alice_client.get(reverse("chat_detail", args=[child.public_id])).content.decode()
    undo_url = reverse("chat_compaction_undo", args=[run.public_id, "undo"])
    assert f'action="{undo_url}"' in page
    assert bob_client.post(undo_url).status_code == 404
    response = alice_client.post(undo_url)
    assert response.status_code == 302
    # The page opens at the notices next to the status row, where the outcome is said.
    assert response.url == reverse("chat_detail", args=[session.public_id]) + "#chat-notices"
    page = alice_client.get(response.url).content.decode()
    assert "Undone: the context from before this compaction is restored" in page
    assert "Redo this compaction" in page
    assert "This session is read-only" not in page
    child_url = reverse("chat_detail", args=[child.public_id])
    live_url = reverse("chat_detail", args=[session.public_id])
    assert alice_client.get(child_url).url == live_url  # follows to the live session
    old = alice_client.get(child_url + "?history=1").content.decode()
    assert "This session is read-only" in old
    redo = alice_client.post(reverse("chat_compaction_undo", args=[run.public_id, "redo"]))
    assert redo.url == reverse("chat_detail", args=[child.public_id]) + "#chat-notices"
    assert (
        alice_client.post(
            reverse("chat_compaction_undo", args=[run.public_id, "explode"])
        ).status_code
        == 404
    )


def claude_code_file(path, turns=10):
    """A Claude Code transcript of the shape met in real ones (a queue-operation and a
    file-history-snapshot record, tool_use / tool_result pairs with usage, a sidechain)."""
    import json

    session_id = "c7d3d95c-57f0-4359-8f4b-926a9bef5a3f"
    base = {"sessionId": session_id, "cwd": "/tmp/proj", "version": "2.1.14", "isSidechain": False}
    lines = [
        {"type": "queue-operation", "operation": "dequeue", "sessionId": session_id},
        {"type": "file-history-snapshot", "messageId": "m0", "snapshot": {}},
    ]
    parent = None
    for i in range(turns):
        records = [
            {"type": "user", "message": {"role": "user", "content": f"step {i}: port module {i}"}},
            {
                "type": "assistant",
                "message": {
                    "id": f"msg_{i}",
                    "role": "assistant",
                    "model": "claude-opus-4-5-20251101",
                    "content": [
                        {"type": "text", "text": f"Reading module {i}."},
                        {
                            "type": "tool_use",
                            "id": f"toolu_{i}",
                            "name": "Read",
                            "input": {"file_path": f"/tmp/proj/src/mod_{i}.py"},
                        },
                    ],
                    "usage": {
                        "input_tokens": 3,
                        "cache_read_input_tokens": 1000 * i,
                        "output_tokens": 40,
                    },
                },
            },
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"toolu_{i}",
                            "content": "\n".join(
                                f"{n:>6}\u2192def f_{i}_{n}(): return {n}" for n in range(120)
                            ),
                        },
                    ],
                },
            },
            {
                "type": "assistant",
                "isSidechain": i == 3,
                "message": {
                    "id": f"msg_{i}b",
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"Module {i} ported."}],
                },
            },
        ]
        for n, record in enumerate(records):
            uuid = f"u{i}-{n}"
            lines.append(
                {
                    **base,
                    **record,
                    "uuid": uuid,
                    "parentUuid": parent,
                    "timestamp": f"2026-01-21T06:{20 + i:02d}:{n:02d}.000Z",
                }
            )
            parent = uuid
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


@pytest.mark.parametrize("mode", ["in_place", "rotation"])
def test_an_imported_claude_code_session_undoes_exactly(alice, alice_client, tmp_path, mode):
    """The shape met in real Claude Code transcripts, imported, opened in the chat,
    compacted with a small tail, undone and redone exactly."""
    from hermes_web.importers import import_path

    report = import_path(claude_code_file(tmp_path / "session.jsonl"), owner=alice)
    assert report.ok, report.to_dict()
    session = report.sessions[0]
    Session.objects.filter(pk=session.pk).update(compaction_mode=mode)
    session.refresh_from_db()
    assert alice_client.get(reverse("chat_detail", args=[session.public_id])).status_code == 200
    before = openai_messages(session)
    run = run_compaction(
        request_compaction(
            session=session, requested_by=alice, config_overrides={"tail_token_budget": 1500}
        ).pk
    )
    assert run.status == "committed", (run.status, run.reason, run.error)
    after = openai_messages(resolve_tip(Session.objects.get(pk=session.pk)))
    assert len(after) < len(before)
    run = undo_compaction(run, user=alice)
    assert openai_messages(resolve_tip(Session.objects.get(pk=session.pk))) == before
    redo_compaction(run, user=alice)
    assert openai_messages(resolve_tip(Session.objects.get(pk=session.pk))) == after
