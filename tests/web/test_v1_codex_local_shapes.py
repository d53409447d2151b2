"""Codex's local compaction exchange, replayed with the ``openai`` SDK in the shapes the real
Codex CLI 0.171.0 sends (test_v1_codex_local_compaction runs the CLI itself): the
summarization request, then the rebuilt history carrying the summary."""

import json

import openai
import pytest

from hermes_web.models import Compaction, Session
from hermes_web.openai_compat.codex_local import PROMPT_OPENING, SUMMARY_PREFIX
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = (
    f"{PROMPT_OPENING} Create a handoff summary for another LLM that will resume the task.\n\n"
    "Include:\n- Current progress and key decisions made"
)
SUMMARY = "The log has five entries; the code word is in the third."


@pytest.fixture
def sdk(live_server, alice, upstream):
    return openai.OpenAI(
        base_url=f"{live_server.url}/v1", api_key=issue_key(alice), max_retries=0, timeout=30
    )


def said(role: str, text: str) -> dict:
    kind = "input_text" if role == "user" else "output_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def ask(sdk, items: list[dict]) -> str:
    reply = sdk.responses.create(
        model="fake-chat", instructions="You are Codex.", input=items, store=False
    )
    return reply.output_text


def conversation(sdk, upstream, turns: int = 4) -> list[dict]:
    items: list[dict] = []
    for number in range(turns):
        items.append(said("user", f"Entry {number}."))
        upstream.enqueue({"content": f"Logged entry {number}."})
        items.append(said("assistant", ask(sdk, items)))
    return items


def test_the_summarization_turn_is_stored_as_a_compaction_and_the_next_request_continues_it(
    sdk, upstream, alice
):
    items = conversation(sdk, upstream)
    [session] = Session.objects.filter(owner=alice)
    rows = session.messages.count()
    upstream.enqueue({"content": SUMMARY, "prompt_tokens": 61_000})
    assert ask(sdk, [*items, said("user", PROMPT)]) == SUMMARY

    run = Compaction.objects.get()
    assert (run.session_id, run.status, run.source) == (session.pk, "committed", "codex")
    assert run.native_summary == SUMMARY
    assert run.tokens_before == 61_000
    assert run.result_session is None  # until Codex's next request
    assert session.messages.count() == rows  # neither the prompt nor the summary is a turn
    assert "Codex local compaction" in run.who_asked

    kept = [said("user", f"Entry {number}.") for number in range(4)]
    rebuilt = [*kept, said("user", f"{SUMMARY_PREFIX}\n{SUMMARY}"), said("user", "Go on.")]
    upstream.enqueue({"content": "Going on."})
    assert ask(sdk, rebuilt) == "Going on."
    assert SUMMARY in json.dumps(upstream.requests[-1]["messages"])  # the model read it
    run.refresh_from_db()
    child = run.result_session
    assert child is not None
    assert child.parent_id == session.pk
    session.refresh_from_db()
    assert session.end_reason == Session.EndReason.COMPRESSION
    # (the instructions are the first row: the system prompt)
    assert child.messages.get(is_summary=True).position == 1 + len(kept)
    assert run.report["counts"]["messages_after"] == 1 + len(kept) + 1
    # The next turn continues the child, as any conversation goes on.
    upstream.enqueue({"content": "Still going."})
    assert ask(sdk, [*rebuilt, said("assistant", "Going on."), said("user", "More.")])
    assert Session.objects.filter(owner=alice).count() == 2
    assert child.messages.count() == 1 + len(rebuilt) + 3


def test_a_summary_no_stored_compaction_wrote_starts_a_conversation_of_its_own(
    sdk, upstream, alice
):
    conversation(sdk, upstream, turns=2)
    upstream.enqueue({"content": "Fine."})
    ask(sdk, [said("user", f"{SUMMARY_PREFIX}\nSomething else."), said("user", "Go on.")])
    assert not Compaction.objects.exists()
    assert Session.objects.filter(owner=alice, parent__isnull=True).count() == 2
