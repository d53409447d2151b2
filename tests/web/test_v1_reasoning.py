"""Responses ``reasoning`` items: a client's (Codex sends them with ``encrypted_content``)
are kept with the assistant message they precede, stored in its row's ``extra`` and never
sent upstream nor compared; an upstream's reasoning is echoed as a ``reasoning`` output
item, streamed and not."""

import json

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_web.models import Message, Session
from hermes_web.openai_compat import responses as responses_api
from hermes_web.openai_compat.matching import canonical, prefix_hashes
from hermes_web.openai_compat.upstream import Reply
from hermes_web.openai_compat.validation import ChatRequest
from tests.web.test_v1_translation import chat_facts, ids, responses_facts, responses_inputs, texts
from tests.web.v1_helpers import issue_key


def codex_reasoning(draw_id: str, text: str) -> dict:
    return {
        "type": "reasoning",
        "id": f"rs_{draw_id}",
        "summary": [{"type": "summary_text", "text": text}],
        "encrypted_content": f"gAAAA{draw_id}",
    }


@st.composite
def inputs_with_reasoning(draw):
    """Responses input with a reasoning item before some assistant items (as a model emits
    them: reasoning, then its message or call)."""
    items = draw(responses_inputs())
    out, expected = [], []
    for item in items:
        is_assistant = item["type"] == "function_call" or item.get("role") == "assistant"
        if is_assistant and draw(st.booleans()):
            reasoning = codex_reasoning(draw(ids), draw(texts))
            out.append(reasoning)
            expected.append((reasoning, item))
        out.append(item)
    return items, out, expected


def _owner(messages: list[dict], item: dict) -> dict:
    for message in messages:
        if message["role"] != "assistant":
            continue
        if item["type"] == "function_call":
            if item["call_id"] in {c["id"] for c in message.get("tool_calls") or ()}:
                return message
        elif message["content"] == item["content"][0]["text"]:
            return message
    raise AssertionError(f"no assistant message for {item}")


@settings(max_examples=60, deadline=None)
@given(inputs_with_reasoning())
def test_reasoning_items_ride_with_their_assistant_message_and_change_nothing_else(case):
    plain, with_reasoning, expected = case
    chat = responses_api.to_chat({"model": "m", "input": with_reasoning}, [])
    messages = chat["messages"]
    # Text, calls, results and images as without the reasoning items…
    assert chat_facts(messages) == responses_facts(plain)
    # …and the same conversation for matching.
    without = responses_api.to_chat({"model": "m", "input": plain}, [])["messages"]
    assert prefix_hashes(messages) == prefix_hashes(without)
    # Every reasoning item is kept, whole, with the message it came before.
    kept = [item for m in messages for item in m.get("reasoning_items", ())]
    assert sorted(kept, key=json.dumps) == sorted((r for r, _ in expected), key=json.dumps)
    for reasoning, item in expected:
        assert reasoning in _owner(messages, item)["reasoning_items"]


@settings(max_examples=60, deadline=None)
@given(texts, texts, st.booleans())
def test_a_reply_with_reasoning_is_echoed_and_comes_back_with_its_message(thought, text, call):
    calls = (
        [{"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
        if call
        else []
    )
    reply = Reply(content=text, reasoning=thought, tool_calls=calls)
    request = ChatRequest(model="m", messages=[], extra={"response_id": "resp_1", "echo": {}})
    output = responses_api.render(request, reply)["output"]
    assert output[0]["type"] == "reasoning"
    assert output[0]["content"] == [{"type": "reasoning_text", "text": thought}]
    items = [{"type": "message", "role": "user", "content": "q"}, *output]
    items += [{"type": "function_call_output", "call_id": c["id"], "output": "ok"} for c in calls]
    answer = responses_api.to_chat({"model": "m", "input": items}, [])["messages"][1]
    assert answer["reasoning_items"] == [output[0]]
    assert canonical(answer) == canonical(reply.message())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
def test_reasoning_is_echoed_stored_and_kept_off_the_upstream(
    live_server, alice, upstream, streamed
):
    sdk = openai.OpenAI(
        base_url=f"{live_server.url}/v1", api_key=issue_key(alice), max_retries=0, timeout=30
    )

    def respond(items):
        options = {"model": "fake-chat", "input": items, "store": False}
        if streamed:
            with sdk.responses.stream(**options) as stream:
                kinds = [event.type for event in stream]
                return stream.get_final_response(), kinds
        return sdk.responses.create(**options), []

    upstream.enqueue(
        {"reasoning_content": "The user wants a listing.", "content": "Here it is."},
        {"content": "Done."},
    )
    items: list[dict] = [{"type": "message", "role": "user", "content": "List the files."}]
    first, kinds = respond(items)
    assert [item.type for item in first.output] == ["reasoning", "message"]
    assert first.output[0].content[0].text == "The user wants a listing."
    assert first.output_text == "Here it is."
    if streamed:
        assert "response.reasoning_text.delta" in kinds
    stored = Message.objects.get(role="assistant")
    assert stored.reasoning == "The user wants a listing."

    # Codex sends the output back, plus reasoning of its own before an earlier answer.
    items = [
        {"type": "message", "role": "user", "content": "Before that: hello."},
        codex_reasoning("abc", "Greet back."),
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hi."}],
        },
        *items,
        *[item.model_dump(exclude_none=True) for item in first.output],
        {"type": "message", "role": "user", "content": "Thanks."},
    ]
    second, _ = respond(items)
    assert second.output_text == "Done."
    # A new history (it does not start with the stored one): a new session holding it all.
    session = Session.objects.order_by("-pk").first()
    rows = list(session.messages.filter(role="assistant").order_by("position"))
    assert rows[0].extra["reasoning_items"] == [codex_reasoning("abc", "Greet back.")]
    echoed = rows[1].extra["reasoning_items"]
    assert echoed[0]["content"] == [{"type": "reasoning_text", "text": "The user wants a listing."}]
    sent = json.dumps(upstream.requests[-1]["messages"])
    assert "reasoning_items" not in sent
    assert "gAAAAabc" not in sent
