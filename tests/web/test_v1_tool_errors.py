"""Anthropic's ``tool_result`` ``is_error: true``: stored with the tool result (in its
``extra``), passed on to an Anthropic upstream (litellm's translation drops it otherwise),
and left out for an OpenAI-compatible upstream (an unknown field there)."""

import json

import anthropic
import pytest

from compaction import PREFIX_OPENING
from hermes_web.models import Compaction, Message, Session
from hermes_web.services.compactions import run_compaction
from tests.web.anthropic_fake import serve_for
from tests.web.test_openai_endpoint import file_text
from tests.web.v1_helpers import issue_key, start_upstream

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-sonnet-4-5-20250929"
TOOLS = [
    {
        "name": "run",
        "description": "Run a command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]


def conversation(*, failed: bool) -> list[dict]:
    """A user turn, two tool calls, and their results: the second failed when ``failed``."""
    calls = [
        {"type": "tool_use", "id": f"toolu_{n}", "name": "run", "input": {"command": f"make {n}"}}
        for n in (1, 2)
    ]
    results = [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "built"},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_2",
            "content": [{"type": "text", "text": "make: *** [2] Error 1"}],
            **({"is_error": True} if failed else {}),
        },
    ]
    return [
        {"role": "user", "content": "Build both targets."},
        {"role": "assistant", "content": calls},
        {"role": "user", "content": results},
    ]


def client(live_server, alice) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=live_server.url, api_key=issue_key(alice), max_retries=0, timeout=120
    )


def stored_flags() -> dict[str, bool]:
    return {
        row.tool_call_id: row.extra.get("is_error", False)
        for row in Message.objects.filter(role="tool")
    }


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
def test_is_error_is_stored_and_an_openai_compatible_upstream_does_not_get_the_field(
    live_server, alice, settings, streamed
):
    upstream = start_upstream(settings)
    try:
        upstream.enqueue({"content": "Target 2 failed."})
        claude = client(live_server, alice)
        options = {
            "model": MODEL,
            "max_tokens": 256,
            "tools": TOOLS,
            "messages": conversation(failed=True),
        }
        if streamed:
            with claude.messages.stream(**options) as stream:
                text = stream.get_final_text()
        else:
            text = claude.messages.create(**options).content[0].text
        assert text == "Target 2 failed."
        assert stored_flags() == {"toolu_1": False, "toolu_2": True}
        sent = [m for m in upstream.requests[-1]["messages"] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in sent] == ["toolu_1", "toolu_2"]
        assert all("is_error" not in m for m in sent)
    finally:
        upstream.stop()


@pytest.fixture
def anthropic_upstream(settings):
    server = serve_for(settings, "anthropic/claude-fake")
    yield server
    server.stop()


@pytest.mark.parametrize("failed", [True, False], ids=["failed", "succeeded"])
def test_an_anthropic_upstream_gets_the_tool_result_is_error_back(
    live_server, alice, anthropic_upstream, failed
):
    reply = client(live_server, alice).messages.create(
        model=MODEL, max_tokens=256, tools=TOOLS, messages=conversation(failed=failed)
    )
    assert reply.content[0].text == "Target 2 failed."
    sent = anthropic_upstream.requests[-1]["messages"]
    results = [
        block
        for message in sent
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert [block["tool_use_id"] for block in results] == ["toolu_1", "toolu_2"]
    assert [block.get("is_error", False) for block in results] == [False, failed]
    assert stored_flags() == {"toolu_1": False, "toolu_2": failed}


def test_the_compacted_context_keeps_is_error_on_the_tool_results_it_holds(
    live_server, alice, anthropic_upstream
):
    claude = client(live_server, alice)
    messages: list[dict] = [{"role": "user", "content": "Build every target."}]
    for number in range(6):
        use = {"type": "tool_use", "id": f"toolu_{number}", "name": "run", "input": {}}
        use["input"] = {"command": f"make {number}"}
        anthropic_upstream.replies.append(
            {"content": [use], "input_tokens": 2_000 + 12_000 * number}
        )
        reply = claude.messages.create(model=MODEL, max_tokens=256, tools=TOOLS, messages=messages)
        messages.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
        failed = number == 5
        output = "make: *** Error 1" if failed else file_text(f"target {number}")
        result = {"type": "tool_result", "tool_use_id": f"toolu_{number}", "content": output}
        messages.append(
            {"role": "user", "content": [{**result, "is_error": True} if failed else result]}
        )
    assert "toolu_5" not in stored_flags()  # its result is not sent yet
    messages.append({"role": "assistant", "content": "Target 5 failed."})
    answer = [{"type": "text", "text": "Target 5 failed."}]
    anthropic_upstream.replies.append({"content": answer, "input_tokens": 70_000})
    claude.messages.create(model=MODEL, max_tokens=256, tools=TOOLS, messages=messages[:-1])
    assert stored_flags()["toolu_5"] is True
    assert Session.objects.count() == 1

    run = run_compaction(Compaction.objects.get().pk)
    assert run.status == Compaction.Status.COMMITTED, run.error
    # The client forgets the flag on its copy: the stored row still has it.
    messages[-2]["content"][0].pop("is_error")
    messages.append({"role": "user", "content": "What failed?"})
    anthropic_upstream.replies.append({"input_tokens": 9_000})
    claude.messages.create(model=MODEL, max_tokens=256, tools=TOOLS, messages=messages)
    sent = anthropic_upstream.requests[-1]
    assert PREFIX_OPENING in json.dumps(sent, ensure_ascii=False)
    results = {
        block["tool_use_id"]: block.get("is_error", False)
        for message in sent["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    }
    assert results["toolu_5"] is True
    assert not any(flag for call_id, flag in results.items() if call_id != "toolu_5")
