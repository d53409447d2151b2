"""``POST /v1/messages`` driven by the official ``anthropic`` SDK against a live server and the
local fake upstream: an agent loop through a compaction (streaming and not), Claude Code's
request shapes, count_tokens and Anthropic-shaped errors."""

import json

import anthropic
import httpx
import pytest

from compaction import PREFIX_OPENING, validate_tool_pairs
from hermes_web.models import Compaction, Message, Session
from hermes_web.services.compactions import run_compaction
from tests.web.test_openai_endpoint import MIDDLE_MARKER, file_text
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-sonnet-4-5-20250929"
TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]
# Claude Code's shape: text blocks with cache_control, and a volatile suffix it drops
# between runs of the same conversation.
SYSTEM = [
    {
        "type": "text",
        "text": "You are Claude Code (1M context).",
        "cache_control": {"type": "ephemeral"},
    },
    {"type": "text", "text": "Be careful."},
]


@pytest.fixture
def raw_key(alice):
    return issue_key(alice)


@pytest.fixture
def claude(live_server, raw_key, upstream):
    return anthropic.Anthropic(base_url=live_server.url, api_key=raw_key, max_retries=0, timeout=30)


def compact_call(call_id: str, path: str) -> dict:
    # A model that writes compact JSON: the SDK's client re-serialises it with spaces.
    return {
        "id": call_id,
        "type": "function",
        "function": {
            "name": "read_file",
            "arguments": json.dumps({"path": path}, separators=(",", ":")),
        },
    }


def ask(claude, messages, *, streamed, system=SYSTEM, **kwargs):
    """One request the way an agent makes it: (the final message, the raw headers)."""
    options = {
        "model": MODEL,
        "max_tokens": 1024,
        "system": system,
        "messages": messages,
        "tools": TOOLS,
        **kwargs,
    }
    if streamed:
        raw = claude.messages.with_raw_response.create(stream=True, **options)
        return [event.type for event in raw.parse()], raw.headers
    raw = claude.messages.with_raw_response.create(**options)
    return raw.parse(), raw.headers


def run_tools(message) -> list[dict]:
    results = []
    for block in message.content:
        if block.type == "tool_use":
            path = block.input["path"]
            marker = MIDDLE_MARKER if path == "src/2.txt" else ""
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": block.id,
                    "content": [{"type": "text", "text": file_text(path, marker)}],
                }
            )
    return results


def turn(claude, messages, *, streamed):
    """One agent turn; the reply and the tool results are appended to ``messages``."""
    if streamed:
        options = {
            "model": MODEL,
            "max_tokens": 1024,
            "system": SYSTEM,
            "messages": messages,
            "tools": TOOLS,
        }
        with claude.messages.stream(**options) as stream:
            message = stream.get_final_message()
            headers = stream.response.headers
    else:
        message, headers = ask(claude, messages, streamed=False)
    messages.append(
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]}
    )
    results = run_tools(message)
    if results:
        # Claude Code adds a reminder to the turn that carries the results.
        reminder = {
            "type": "text",
            "text": f"<system-reminder>turn {len(messages)}</system-reminder>",
        }
        messages.append({"role": "user", "content": [*results, reminder]})
    return message, headers


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
def test_a_claude_agent_loop_is_one_conversation_compacts_and_then_gets_the_compacted_context(
    claude, upstream, alice, streamed
):
    messages = [{"role": "user", "content": "Read the sources and tell me what batches readings."}]
    for number in range(10):
        upstream.enqueue(
            {
                "tool_calls": [compact_call(f"call_{number}", f"src/{number}.txt")],
                "prompt_tokens": 2_000 + 7_000 * number,
            }
        )
        message, headers = turn(claude, messages, streamed=streamed)
        assert message.stop_reason == "tool_use"
        assert message.usage.input_tokens == 2_000 + 7_000 * number
        # Claude Code drops the volatile suffix on later runs: still the same conversation.
        SYSTEM[0]["text"] = (
            "You are Claude Code." if number % 2 else "You are Claude Code (1M context)."
        )
    session = Session.objects.get()
    assert headers["x-hermes-session"] == session.public_id
    sent = upstream.requests[-1]
    assert sent["model"] == "fake-chat"  # the claude-* name reached the served model
    assert "cache_control" not in json.dumps(sent)
    assert validate_tool_pairs(sent["messages"]) == []
    assert sent["tools"][0]["function"]["name"] == "read_file"
    stored = Message.objects.filter(session=session).order_by("position")
    assert [m.role for m in stored][:4] == ["system", "user", "assistant", "tool"]
    run = Compaction.objects.get()
    run = run_compaction(run.pk)
    assert run.status == Compaction.Status.COMMITTED, run.error
    upstream.clear()

    messages.append(
        {"role": "user", "content": [{"type": "text", "text": "Which gateway is busiest?"}]}
    )
    upstream.enqueue({"content": "Gateway 3.", "prompt_tokens": 9_000})
    message, headers = turn(claude, messages, streamed=streamed)
    assert [b.text for b in message.content] == ["Gateway 3."]
    assert message.stop_reason == "end_turn"
    text = json.dumps(upstream.requests[-1]["messages"], ensure_ascii=False)
    assert PREFIX_OPENING in text
    assert MIDDLE_MARKER not in text
    assert headers["x-hermes-session"] == run.result_session.public_id
    assert headers["x-hermes-compaction"].endswith(f"/compactions/{run.public_id}/")
    assert Session.objects.filter(owner=alice).count() == 2  # the root and its continuation


def test_the_stream_carries_the_full_event_set(claude, upstream):
    upstream.enqueue(
        {
            "content": "Let me look.",
            "reasoning_content": "",
            "tool_calls": [compact_call("call_a", "a.txt")],
            "prompt_tokens": 50,
        }
    )
    kinds, headers = ask(claude, [{"role": "user", "content": "go"}], streamed=True)
    assert kinds[0] == "message_start"
    assert kinds.count("content_block_delta") >= 2
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 2
    upstream.enqueue({"tool_calls": [compact_call("call_b", "b.txt")]})
    with claude.messages.stream(
        model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "again"}], tools=TOOLS
    ) as stream:
        final = stream.get_final_message()
    assert final.content[-1].type == "tool_use"
    assert final.content[-1].input == {"path": "b.txt"}


def test_claude_codes_request_shapes_are_accepted(claude, upstream):
    upstream.enqueue({"content": "ok"})
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
                {"type": "redacted_thinking", "data": "cmVk"},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "no such file",
                    "is_error": True,
                }
            ],
        },
        {"role": "system", "content": "A mid-conversation note."},
        {"role": "user", "content": "go on"},
    ]
    response = claude.messages.create(
        model="claude-haiku-4-5",
        max_tokens=32_000,
        system="plain system",
        messages=messages,
        tools=TOOLS,
        tool_choice={"type": "auto"},
        stop_sequences=["STOP"],
        metadata={"user_id": "user_abc_account__session_1"},
        extra_body={
            "temperature": 0.2,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "context_management": {"edits": []},
            "output_config": {"effort": "high"},
        },
        extra_query={"beta": "true"},
        extra_headers={"anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14"},
    )
    assert response.content[0].text == "ok"
    sent = upstream.requests[-1]
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "system", "user"]
    assert sent["messages"][1]["content"][1]["image_url"]["url"].startswith(
        "data:image/png;base64,"
    )
    assert sent["messages"][4]["content"] == "A mid-conversation note."
    assert sent["stop"] == ["STOP"]
    assert sent["temperature"] == 0.2
    assert "thinking" not in sent
    assert "context_management" not in sent


def test_count_tokens_and_errors_in_anthropics_shape(claude, upstream, live_server, raw_key):
    counted = claude.messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "hello " * 100}], system="s", tools=TOOLS
    )
    assert 100 <= counted.input_tokens < 400
    with pytest.raises(anthropic.AuthenticationError) as caught:
        anthropic.Anthropic(
            base_url=live_server.url, api_key="hk_wrong", max_retries=0
        ).messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["error"]["type"] == "authentication_error"
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model=MODEL, max_tokens=5, messages=[{"role": "robot", "content": "hi"}]
        )
    assert caught.value.body["type"] == "error"
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.create(
            model="gpt-unknown", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    # The key also works as a Bearer token (ANTHROPIC_AUTH_TOKEN).
    response = httpx.post(
        f"{live_server.url}/v1/messages?beta=true",
        json={"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {raw_key}"},
    )
    assert response.status_code == 200, response.text
    upstream.enqueue({"status": 429, "error": "slow down"})
    with pytest.raises(anthropic.RateLimitError) as caught:
        claude.messages.create(
            model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "again"}]
        )
    assert caught.value.body["error"]["type"] == "rate_limit_error"


def test_the_raw_stream_has_pings_and_thinking_deltas(live_server, raw_key, upstream):
    upstream.enqueue({"content": "Answer.", "reasoning_content": "Pondering."})
    response = httpx.post(
        f"{live_server.url}/v1/messages",
        json={
            "model": MODEL,
            "max_tokens": 5,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
        headers={"x-api-key": raw_key},
    )
    events = [
        line.split(": ", 1)[1] for line in response.text.splitlines() if line.startswith("event: ")
    ]
    assert events[:2] == ["message_start", "ping"]
    assert events[-2:] == ["message_delta", "message_stop"]
    assert "text_delta" in response.text
    assert '"thinking_delta", "thinking": "Pondering."' in response.text
    stored = Message.objects.get(role="assistant")
    assert stored.content == "Answer."


def test_a_stream_cut_off_mid_reply_ends_with_an_error_event_and_stores_nothing(claude, upstream):
    upstream.enqueue({"content": "first answer"})
    history = [{"role": "user", "content": "a question"}]
    first = claude.messages.create(model=MODEL, max_tokens=50, messages=history)
    history += [
        {"role": "assistant", "content": first.content[0].text},
        {"role": "user", "content": "go on"},
    ]
    before = list(Message.objects.values_list("pk", "content"))
    upstream.enqueue({"content": "a long reply that never arrives whole", "break_after": 1})
    with (
        pytest.raises(anthropic.APIStatusError) as caught,
        claude.messages.stream(model=MODEL, max_tokens=50, messages=history) as stream,
    ):
        stream.get_final_message()
    assert caught.value.body["error"]["type"] == "api_error"
    assert list(Message.objects.values_list("pk", "content")) == before


def test_thinking_blocks_reach_only_an_anthropic_upstream(claude, upstream, settings):
    history = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
                {"type": "text", "text": "yo"},
            ],
        },
        {"role": "user", "content": "again"},
    ]
    upstream.enqueue({"content": "ok"})
    claude.messages.create(
        model=MODEL,
        max_tokens=50,
        messages=history,
        extra_body={"thinking": {"type": "enabled", "budget_tokens": 1024}},
    )
    sent = upstream.requests[-1]
    assert sent["messages"][1] == {"role": "assistant", "content": "yo"}
    assert "thinking" not in sent
    # Served as a Claude model through litellm, the same request keeps them.
    from hermes_web.openai_compat.anthropic import parse

    settings.HERMES_API_MODELS = ["anthropic/claude-sonnet-4-5"]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": history}
    body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    chat = parse(json.dumps(body).encode())
    assert chat.messages[1]["thinking_blocks"][0]["signature"] == "c2ln"
    assert chat.params["thinking"] == {"type": "enabled", "budget_tokens": 1024}
