"""``POST /v1/responses`` driven by the official ``openai`` SDK against a live server and the
local fake upstream: Codex's way (store:false, full input each time, streaming) through a
compaction, JSON replies, previous_response_id, tools and errors."""

import json

import openai
import pytest

from compaction import PREFIX_OPENING, validate_tool_pairs
from hermes_web.models import Compaction, Session
from hermes_web.services.compactions import run_compaction
from tests.web.test_openai_endpoint import MIDDLE_MARKER, file_text
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db(transaction=True)

READ_FILE = {
    "type": "function",
    "name": "read_file",
    "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    "strict": False,
}
TOOLS = [
    READ_FILE,
    {"type": "web_search"},  # a built-in: dropped
    {
        "type": "namespace",
        "name": "git",
        "description": "git tools",
        "tools": [
            {
                "type": "function",
                "name": "git_log",
                "parameters": {"type": "object", "properties": {}},
            }
        ],
    },
]


@pytest.fixture
def sdk(live_server, alice, upstream):
    return openai.OpenAI(
        base_url=f"{live_server.url}/v1", api_key=issue_key(alice), max_retries=0, timeout=30
    )


def spaced_call(call_id: str, path: str) -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": path})},
    }


def respond(sdk, items, *, streamed, **kwargs):
    """One request as Codex makes it: (the final response, the response headers)."""
    options = {
        "model": "fake-chat",
        "instructions": "You are Codex.",
        "input": items,
        "tools": TOOLS,
        "store": False,
        "parallel_tool_calls": False,
        **kwargs,
    }
    if streamed:
        with sdk.responses.stream(**options) as stream:
            kinds = []
            for event in stream:
                kinds.append(event.type)
            final = stream.get_final_response()
            assert kinds[0] == "response.created"
            assert kinds[-1] == "response.completed"
            return final, stream._response.headers  # noqa: SLF001
    raw = sdk.responses.with_raw_response.create(**options)
    return raw.parse(), raw.headers


def run_tools(response) -> list[dict]:
    outputs = []
    for item in response.output:
        if item.type == "function_call":
            path = json.loads(item.arguments)["path"]
            marker = MIDDLE_MARKER if path == "src/2.txt" else ""
            outputs.append(
                {
                    "type": "function_call_output",
                    "call_id": item.call_id,
                    "output": file_text(path, marker),
                }
            )
    return outputs


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
def test_a_codex_style_loop_is_one_conversation_and_gets_the_compacted_context(
    sdk, upstream, alice, streamed
):
    items: list[dict] = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "Sandbox: read-only."}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Read the sources."}],
        },
    ]
    for number in range(10):
        upstream.enqueue(
            {
                "content": f"Reading file {number}." if number % 2 else "",
                "tool_calls": [spaced_call(f"call_{number}", f"src/{number}.txt")],
                "prompt_tokens": 2_000 + 7_000 * number,
            }
        )
        response, headers = respond(sdk, items, streamed=streamed)
        assert response.usage.input_tokens == 2_000 + 7_000 * number
        calls = [item for item in response.output if item.type == "function_call"]
        assert [c.name for c in calls] == ["read_file"]
        # Codex keeps the output items (and a reasoning item a model may add) and sends all.
        items += [item.model_dump(exclude_none=True) for item in response.output]
        items.append(
            {"type": "reasoning", "id": f"rs_{number}", "summary": [], "encrypted_content": "x"}
        )
        items += run_tools(response)
    session = Session.objects.get()
    assert headers["x-hermes-session"] == session.public_id
    sent = upstream.requests[-1]
    assert sent["model"] == "fake-chat"
    assert sent["messages"][0] == {"role": "system", "content": "You are Codex."}
    assert validate_tool_pairs(sent["messages"]) == []
    assert [t["function"]["name"] for t in sent["tools"]] == ["read_file", "git_log"]
    assert sent["parallel_tool_calls"] is False
    run = run_compaction(Compaction.objects.get().pk)
    assert run.status == Compaction.Status.COMMITTED, run.error
    upstream.clear()

    items.append(
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Which gateway is busiest?"}],
        }
    )
    upstream.enqueue({"content": "Gateway 3.", "prompt_tokens": 9_000})
    response, headers = respond(sdk, items, streamed=streamed)
    assert response.output_text == "Gateway 3."
    text = json.dumps(upstream.requests[-1]["messages"], ensure_ascii=False)
    assert PREFIX_OPENING in text
    assert MIDDLE_MARKER not in text
    assert headers["x-hermes-session"] == run.result_session.public_id
    assert Session.objects.filter(owner=alice).count() == 2


def test_a_string_input_and_previous_response_id_continue_a_stored_conversation(sdk, upstream):
    upstream.enqueue({"content": "Hello!"}, {"content": "Still here."})
    first = sdk.responses.create(model="openai/fake-chat", input="hi there")
    assert first.output_text == "Hello!"
    second = sdk.responses.create(
        model="openai/fake-chat", input="are you there?", previous_response_id=first.id
    )
    assert second.output_text == "Still here."
    assert upstream.requests[-1]["messages"] == [
        {"role": "user", "content": "hi there"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "are you there?"},
    ]
    assert Session.objects.count() == 1
    with pytest.raises(openai.NotFoundError):
        sdk.responses.create(model="openai/fake-chat", input="x", previous_response_id="resp_nope")


def test_responses_errors_are_openai_shaped(sdk, upstream):
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.responses.create(
            model="openai/fake-chat", input=[{"type": "message", "role": "robot", "content": "x"}]
        )
    assert caught.value.code == "invalid_value"
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.responses.create(model="gpt-unknown", input="hi")
    assert caught.value.code == "model_not_found"
    upstream.enqueue({"status": 429, "error": "slow down"})
    with pytest.raises(openai.RateLimitError):
        sdk.responses.create(model="openai/fake-chat", input="hi", stream=False)
    assert not Session.objects.exists()


def test_a_stream_cut_off_mid_reply_ends_with_an_error_event_and_stores_nothing(sdk, upstream):
    upstream.enqueue({"content": "a long reply that never arrives whole", "break_after": 1})
    with (
        pytest.raises(openai.APIError) as caught,
        sdk.responses.stream(model="openai/fake-chat", input="a question") as stream,
    ):
        for _ in stream:
            pass
    assert "fake-chat failed" in str(caught.value)
    assert not Session.objects.exists()
