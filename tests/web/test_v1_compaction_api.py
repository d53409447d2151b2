"""The providers' own compaction requests served by our engine, through the official SDKs
against a live hermes-web and the local fake upstream: OpenAI's ``responses.compact`` and
Codex's ``compaction_trigger`` (a stored compaction, its item sent back continues from our
summary), and what a tampered or foreign item gets."""

import base64
import contextlib
import json
import zlib

import anthropic
import openai
import pytest
from django.urls import reverse

from compaction import PREFIX_OPENING, validate_tool_pairs
from hermes_web.models import Compaction, Session
from hermes_web.openai_compat import compacting
from tests.web.anthropic_fake import serve_for
from tests.web.test_openai_endpoint import MIDDLE_MARKER, file_text
from tests.web.v1_helpers import AgentUpstream, issue_key, start_upstream

pytestmark = pytest.mark.django_db(transaction=True)

READ_FILE = {
    "type": "function",
    "name": "read_file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}


@pytest.fixture
def upstream(settings):
    """Queued replies go to the agent's requests (they offer tools), the summarizer's get the
    default reply: a compaction before the model call does not take the model's answer."""
    server = start_upstream(settings, AgentUpstream)
    yield server
    server.stop()


@pytest.fixture
def sdk(live_server, alice, upstream):
    return openai.OpenAI(
        base_url=f"{live_server.url}/v1", api_key=issue_key(alice), max_retries=0, timeout=30
    )


def conversation(turns: int = 6) -> list[dict]:
    """A Responses input of ``turns`` tool rounds (about 4,000 tokens of output each), the
    first after the marker-bearing file, ending with a user turn."""
    items: list[dict] = [{"type": "message", "role": "developer", "content": "You read files."}]
    for number in range(turns):
        path = f"src/{number}.txt"
        items += [
            {"type": "message", "role": "user", "content": f"Read {path}."},
            {
                "type": "function_call",
                "call_id": f"call_{number}",
                "name": "read_file",
                "arguments": json.dumps({"path": path}),
            },
            {
                "type": "function_call_output",
                "call_id": f"call_{number}",
                "output": file_text(path, MIDDLE_MARKER if number == 1 else ""),
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"File {number} is read."}],
            },
        ]
    items.append({"type": "message", "role": "user", "content": "Now summarise the gateways."})
    return items


def compaction_item(output) -> dict:
    items = [item for item in output if item.type == "compaction"]
    assert len(items) == 1
    return items[0].model_dump(exclude_none=True)


def test_responses_compact_stores_our_compaction_and_the_item_continues_from_its_summary(
    sdk, upstream, alice, alice_client
):
    items = conversation()
    compacted = sdk.responses.compact(model="fake-chat", input=items)

    assert compacted.object == "response.compaction"
    # The user messages, verbatim in order, then one compaction item.
    users = [item for item in compacted.output if item.type == "message"]
    assert [user.content[0].text for user in users] == [
        item["content"] for item in items if item.get("role") == "user"
    ]
    assert compacted.output[-1].type == "compaction"
    token = compacted.output[-1].encrypted_content
    assert MIDDLE_MARKER not in token  # a reference to the stored compaction, not its text

    run = Compaction.objects.get()
    assert run.status == Compaction.Status.COMMITTED
    assert run.session.owner == alice
    assert compacted.output[-1].id == f"cmp_{run.public_id}"
    assert compacted.usage.input_tokens == run.tokens_before > 0
    assert compacted.usage.output_tokens > 0
    page = alice_client.get(reverse("compaction_detail", args=[run.public_id]))
    assert page.status_code == 200
    assert PREFIX_OPENING in page.content.decode()

    # The item sent back (everything before it may go): the model reads our summary.
    upstream.clear()
    upstream.enqueue({"content": "Gateway 3 is the busiest.", "prompt_tokens": 9_000})
    follow_up = [
        *[item.model_dump(exclude_none=True) for item in compacted.output],
        {"type": "message", "role": "user", "content": "Which gateway is busiest?"},
    ]
    answer = sdk.responses.create(model="fake-chat", input=follow_up, tools=[READ_FILE])
    assert answer.output_text == "Gateway 3 is the busiest."
    sent = upstream.requests[-1]["messages"]
    text = json.dumps(sent, ensure_ascii=False)
    assert PREFIX_OPENING in text
    assert MIDDLE_MARKER not in text
    assert validate_tool_pairs(sent) == []
    assert sent[-1]["content"] in (
        "Which gateway is busiest?",
        [{"type": "text", "text": "Which gateway is busiest?"}],
    )
    # Stored on the compaction's continuation, not as a conversation of its own.
    live = run.result_session or run.session
    assert live.messages.filter(content="Gateway 3 is the busiest.").exists()
    assert Session.objects.filter(owner=alice).count() == 2

    # The next turn, the answer appended to the same items, matches that session again.
    upstream.enqueue({"content": "Gateway 4 is next.", "prompt_tokens": 9_500})
    again = sdk.responses.create(
        model="fake-chat",
        tools=[READ_FILE],
        input=[
            *follow_up,
            {"type": "message", "role": "assistant", "content": answer.output_text},
            {"type": "message", "role": "user", "content": "And then?"},
        ],
    )
    assert again.output_text == "Gateway 4 is next."
    assert PREFIX_OPENING in json.dumps(upstream.requests[-1]["messages"], ensure_ascii=False)
    assert live.messages.filter(content="Gateway 4 is next.").exists()
    assert Session.objects.filter(owner=alice).count() == 2


def test_responses_compact_with_previous_response_id_and_instructions(sdk, upstream):
    upstream.enqueue({"content": "All six files are read.", "prompt_tokens": 30_000})
    first = sdk.responses.create(model="fake-chat", input=conversation(), tools=[READ_FILE])
    compacted = sdk.responses.compact(
        model="fake-chat", previous_response_id=first.id, instructions="Focus on gateways."
    )
    run = Compaction.objects.get()
    assert run.status == Compaction.Status.COMMITTED
    assert run.focus == "Focus on gateways."
    assert compacted.output[-1].type == "compaction"
    # The stored reply was part of what was compacted (one conversation, not two).
    assert run.session.messages.filter(content="All six files are read.").exists()


def test_a_changed_or_foreign_compaction_item_is_refused(sdk, live_server, bob, upstream):
    compacted = sdk.responses.compact(model="fake-chat", input=conversation())
    item = compaction_item(compacted.output)
    tampered = {**item, "encrypted_content": item["encrypted_content"][:-2] + "xx"}
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.responses.create(
            model="fake-chat", input=[tampered, {"role": "user", "content": "Go on."}]
        )
    assert refused.value.code == "invalid_encrypted_content"
    assert refused.value.param == "input[0].encrypted_content"

    # Another user's key cannot open alice's compaction.
    other = openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=issue_key(bob), max_retries=0)
    with pytest.raises(openai.BadRequestError) as foreign:
        other.responses.create(model="fake-chat", input=[item, {"role": "user", "content": "Hi"}])
    assert foreign.value.code == "invalid_encrypted_content"
    assert not Session.objects.filter(owner=bob).exists()  # nothing stored for a refusal


def test_a_conversation_too_short_to_compact_is_a_clear_400(sdk):
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.responses.compact(
            model="fake-chat", input=[{"role": "user", "content": "Hello there."}]
        )
    assert refused.value.code == "compaction_nothing_to_summarize"
    assert not Compaction.objects.committed().exists()


@pytest.mark.parametrize("streamed", [False, True])
def test_codex_compaction_trigger_answers_exactly_one_compaction_item(sdk, upstream, streamed):
    items = [*conversation(), {"type": "compaction_trigger"}]
    if streamed:
        with sdk.responses.stream(model="fake-chat", input=items) as stream:
            events = [event.type for event in stream]
            response = stream.get_final_response()
        assert events[0] == "response.created"
        assert events[-1] == "response.completed"
    else:
        response = sdk.responses.create(model="fake-chat", input=items)
    assert [item.type for item in response.output] == ["compaction"]
    # No model turn: at most the summarizer was asked (its requests offer no tools).
    assert all("tools" not in request for request in upstream.requests)
    run = Compaction.objects.get()
    assert run.status == Compaction.Status.COMMITTED
    assert response.output[0].id == f"cmp_{run.public_id}"


def test_compaction_trigger_must_be_the_last_item(sdk):
    items = [{"type": "compaction_trigger"}, {"role": "user", "content": "Hi"}]
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.responses.create(model="fake-chat", input=items)
    assert refused.value.param == "input[0]"
    assert not Session.objects.exists()


@pytest.mark.parametrize("streamed", [False, True])
def test_context_management_compacts_before_the_model_call_past_the_threshold(
    sdk, upstream, streamed
):
    # Under the threshold: answered as it is, nothing compacted.
    upstream.enqueue({"content": "Fine.", "prompt_tokens": 9_000})
    response = sdk.responses.create(
        model="fake-chat",
        input=conversation(5),
        tools=[READ_FILE],
        context_management=[{"type": "compaction", "compact_threshold": 5_000_000}],
    )
    assert [item.type for item in response.output] == ["message"]
    assert not Compaction.objects.exists()
    assert MIDDLE_MARKER in json.dumps(upstream.requests[-1]["messages"])

    upstream.enqueue({"content": "Gateway 3 is the busiest.", "prompt_tokens": 9_000})
    options = {
        "model": "fake-chat",
        "input": conversation(),
        "tools": [READ_FILE],
        "context_management": [{"type": "compaction", "compact_threshold": 10_000}],
    }
    if streamed:
        with sdk.responses.stream(**options) as stream:
            added = [event.item.type for event in stream if event.type.endswith("item.added")]
            response = stream.get_final_response()
        assert added[0] == "compaction"
    else:
        response = sdk.responses.create(**options)
    assert [item.type for item in response.output] == ["compaction", "message"]
    assert response.output_text == "Gateway 3 is the busiest."
    run = Compaction.objects.get()
    assert run.status == Compaction.Status.COMMITTED
    assert response.output[0].id == f"cmp_{run.public_id}"
    # The model answered from our summary, not from the tool outputs it replaced.
    sent = json.dumps(upstream.requests[-1]["messages"], ensure_ascii=False)
    assert PREFIX_OPENING in sent
    assert MIDDLE_MARKER not in sent
    live = run.result_session or run.session
    assert live.messages.filter(content="Gateway 3 is the busiest.").exists()


def test_a_bad_context_management_entry_is_named(sdk):
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.responses.create(
            model="fake-chat",
            input="Hi",
            context_management=[{"type": "compaction", "compact_threshold": "lots"}],
        )
    assert refused.value.param == "context_management[0].compact_threshold"
    assert not Session.objects.exists()


# -- Anthropic on-demand compaction (beta compact-2026-09-04) -----------------------------------

COMPACT_BETA = ["compact-2026-09-04"]
TOOL = {
    "name": "read_file",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


@pytest.fixture
def claude(live_server, alice, upstream):
    return anthropic.Anthropic(
        base_url=live_server.url, api_key=issue_key(alice), max_retries=0, timeout=30
    )


def claude_conversation(turns: int = 6) -> list[dict]:
    """Messages of ``turns`` tool rounds (the marker in the second file's output), ending
    with a user turn."""
    messages: list[dict] = []
    for number in range(turns):
        path = f"src/{number}.txt"
        use = {"type": "tool_use", "id": f"toolu_{number}", "name": "read_file"}
        messages += [
            {"role": "user", "content": f"Read {path}."},
            {"role": "assistant", "content": [{**use, "input": {"path": path}}]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{number}",
                        "content": file_text(path, MIDDLE_MARKER if number == 1 else ""),
                    }
                ],
            },
            {"role": "assistant", "content": f"File {number} is read."},
        ]
    messages.append({"role": "user", "content": "Now summarise the gateways."})
    return messages


def compact_on_demand(claude, messages, **kwargs):
    return claude.beta.messages.create(
        model="fake-chat",
        max_tokens=1024,
        system="You read files.",
        messages=messages,
        compaction={"type": "summarize", **kwargs},
        betas=COMPACT_BETA,
    )


@pytest.mark.parametrize("streamed", [False, True])
def test_anthropic_on_demand_compaction_answers_one_signed_block_and_it_continues(
    claude, upstream, alice, alice_client, streamed
):
    if streamed:
        with claude.beta.messages.stream(
            model="fake-chat",
            max_tokens=1024,
            system="You read files.",
            messages=claude_conversation(),
            compaction={"type": "summarize", "instructions": "Keep the gateways."},
            betas=COMPACT_BETA,
        ) as stream:
            reply = stream.get_final_message()
    else:
        reply = compact_on_demand(claude, claude_conversation(), instructions="Keep the gateways.")
    assert reply.stop_reason == "compaction"
    assert [block.type for block in reply.content] == ["compaction"]
    block = reply.content[0]
    assert block.signature
    assert PREFIX_OPENING in block.content
    assert MIDDLE_MARKER not in block.content
    run = Compaction.objects.get()
    assert run.status == Compaction.Status.COMMITTED
    assert run.focus == "Keep the gateways."
    assert run.session.owner == alice
    assert block.content == run.report["summary"]
    assert reply.usage.iterations[0].type == "compaction"
    assert reply.usage.iterations[0].input_tokens == run.tokens_before
    page = alice_client.get(reverse("compaction_detail", args=[run.public_id]))
    assert page.status_code == 200

    # The block sent back first, byte-exact: the model reads our summary.
    upstream.clear()
    upstream.enqueue({"content": "Gateway 3 is the busiest.", "prompt_tokens": 9_000})
    answer = claude.beta.messages.create(
        model="fake-chat",
        max_tokens=1024,
        system="You read files.",
        tools=[TOOL],
        messages=[
            {"role": "assistant", "content": [block.model_dump(exclude_none=True)]},
            {"role": "user", "content": "Which gateway is busiest?"},
        ],
        betas=COMPACT_BETA,
    )
    assert answer.content[0].text == "Gateway 3 is the busiest."
    sent = json.dumps(upstream.requests[-1]["messages"], ensure_ascii=False)
    assert PREFIX_OPENING in sent
    assert MIDDLE_MARKER not in sent
    live = run.result_session or run.session
    assert live.messages.filter(content="Gateway 3 is the busiest.").exists()
    assert Session.objects.filter(owner=alice).count() == 2


def block_back(block: dict, *rest: dict) -> list[dict]:
    return [{"role": "assistant", "content": [block]}, *rest]


def test_anthropic_compaction_block_errors(claude, live_server, bob):
    reply = compact_on_demand(claude, claude_conversation())
    block = reply.content[0].model_dump(exclude_none=True)
    go_on = {"role": "user", "content": "Go on."}

    def refused(messages, **kwargs):
        with pytest.raises(anthropic.BadRequestError) as caught:
            claude.beta.messages.create(
                model="fake-chat", max_tokens=64, messages=messages, betas=COMPACT_BETA, **kwargs
            )
        assert caught.value.body["error"]["type"] == "invalid_request_error"
        return caught.value.error_code

    signature = block["signature"]
    forged = {**block, "signature": signature[:-3] + ("AAA" if signature[-3:] != "AAA" else "BBB")}
    assert refused(block_back(forged, go_on)) == "compaction_signature_invalid"
    changed = {**block, "content": block["content"] + " (edited)"}
    assert refused(block_back(changed, go_on)) == "compaction_content_mismatch"
    misplaced = [go_on, {"role": "assistant", "content": [block]}, go_on]
    assert refused(misplaced) == "compaction_block_misplaced"
    twice = [{"role": "assistant", "content": [block, block]}, go_on]
    assert refused(twice) == "compaction_block_ambiguous"
    assert (
        refused(block_back(block), compaction={"type": "summarize"})
        == "compaction_nothing_to_summarize"
    )
    pending = [
        go_on,
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_x", "name": "read_file", "input": {}}],
        },
    ]
    assert refused(pending, compaction={"type": "summarize"}) == "compaction_incomplete_turn"
    both = {"compaction": {"type": "summarize"}, "extra_body": {"context_management": {}}}
    refused(claude_conversation(), **both)
    # Another user's key cannot use alice's block.
    other = anthropic.Anthropic(base_url=live_server.url, api_key=issue_key(bob), max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as foreign:
        other.beta.messages.create(
            model="fake-chat", max_tokens=64, messages=block_back(block, go_on), betas=COMPACT_BETA
        )
    assert foreign.value.error_code == "compaction_signature_invalid"
    assert Compaction.objects.count() == 1  # no refused request compacted anything
    assert not Session.objects.filter(owner=bob).exists()


THRESHOLD_BETA = ["compact-2026-01-12"]


def threshold_edit(**fields) -> dict:
    trigger = {"type": "input_tokens", "value": 50_000}
    return {"edits": [{"type": "compact_20260112", "trigger": trigger, **fields}]}


def test_anthropic_threshold_compaction_opens_the_reply_with_our_block(claude, upstream):
    upstream.enqueue({"content": "Gateway 3 is the busiest.", "prompt_tokens": 9_000})
    reply = claude.beta.messages.create(
        model="fake-chat",
        max_tokens=1024,
        system="You read files.",
        tools=[TOOL],
        messages=claude_conversation(14),  # about 56,000 tokens: past the 50,000 trigger
        context_management=threshold_edit(),
        betas=THRESHOLD_BETA,
    )
    assert [block.type for block in reply.content] == ["compaction", "text"]
    assert reply.content[1].text == "Gateway 3 is the busiest."
    run = Compaction.objects.get()
    assert run.status == Compaction.Status.COMMITTED
    assert reply.content[0].content == run.report["summary"]
    assert [step.type for step in reply.usage.iterations] == ["compaction", "message"]
    assert reply.usage.iterations[0].input_tokens == run.tokens_before
    assert reply.usage.input_tokens == 9_000  # the message's own, not the compaction's
    sent = json.dumps(upstream.requests[-1]["messages"], ensure_ascii=False)
    assert PREFIX_OPENING in sent
    assert MIDDLE_MARKER not in sent

    # The reply appended to the history as usual: everything before the block is ignored.
    upstream.enqueue({"content": "Gateway 4 is next.", "prompt_tokens": 9_500})
    later = claude.beta.messages.create(
        model="fake-chat",
        max_tokens=1024,
        system="You read files.",
        tools=[TOOL],
        messages=[
            *claude_conversation(14),
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in reply.content],
            },
            {"role": "user", "content": "And then?"},
        ],
        context_management=threshold_edit(),
        betas=THRESHOLD_BETA,
    )
    assert later.content[0].text == "Gateway 4 is next."
    sent = json.dumps(upstream.requests[-1]["messages"], ensure_ascii=False)
    assert PREFIX_OPENING in sent
    assert MIDDLE_MARKER not in sent
    assert Compaction.objects.count() == 1
    live = run.result_session or run.session
    assert live.messages.filter(content="Gateway 4 is next.").exists()


def test_anthropic_threshold_compaction_paused_streams_the_block_alone(claude, upstream):
    with claude.beta.messages.stream(
        model="fake-chat",
        max_tokens=1024,
        system="You read files.",
        tools=[TOOL],
        messages=claude_conversation(14),
        context_management=threshold_edit(pause_after_compaction=True),
        betas=THRESHOLD_BETA,
    ) as stream:
        reply = stream.get_final_message()
    assert reply.stop_reason == "compaction"
    assert [block.type for block in reply.content] == ["compaction"]
    assert PREFIX_OPENING in reply.content[0].content
    assert all("tools" not in request for request in upstream.requests)  # no model turn
    assert Compaction.objects.get().status == Compaction.Status.COMMITTED


def test_anthropic_threshold_under_its_trigger_and_a_bad_trigger(claude, upstream):
    upstream.enqueue({"content": "Fine.", "prompt_tokens": 9_000})
    reply = claude.beta.messages.create(
        model="fake-chat",
        max_tokens=1024,
        tools=[TOOL],
        messages=claude_conversation(3),
        context_management=threshold_edit(),
        betas=THRESHOLD_BETA,
    )
    assert [block.type for block in reply.content] == ["text"]
    assert not Compaction.objects.exists()
    low = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 9}}]}
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.beta.messages.create(
            model="fake-chat",
            max_tokens=64,
            messages=claude_conversation(3),
            context_management=low,
            betas=THRESHOLD_BETA,
        )
    assert "context_management.edits.0.trigger" in refused.value.message


def test_count_tokens_reads_a_block_as_its_context_and_never_compacts(claude):
    full = claude_conversation()
    before = claude.beta.messages.count_tokens(
        model="fake-chat", messages=full, betas=COMPACT_BETA
    ).input_tokens
    block = compact_on_demand(claude, full).content[0].model_dump(exclude_none=True)
    go_on = {"role": "user", "content": "Go on."}
    after = claude.beta.messages.count_tokens(
        model="fake-chat",
        messages=block_back(block, go_on),
        compaction={"type": "summarize"},  # accepted and ignored
        betas=COMPACT_BETA,
    ).input_tokens
    run = Compaction.objects.get()  # the count compacted nothing more
    assert after < before / 2
    assert after >= run.tokens_after


def test_compacting_again_from_an_item_compacts_the_continuation(sdk, upstream):
    first = sdk.responses.compact(model="fake-chat", input=conversation())
    more = [item.model_dump(exclude_none=True) for item in first.output]
    for number in range(6, 12):  # six more tool rounds after the item
        more += conversation(1)[1:-1]
        more[-3]["call_id"] = more[-2]["call_id"] = f"call_{number}"
    more.append({"type": "message", "role": "user", "content": "Compact again."})
    second = sdk.responses.compact(model="fake-chat", input=more)
    earlier, later = Compaction.objects.order_by("pk")
    assert later.status == Compaction.Status.COMMITTED
    # The second compaction continues the first one's session chain.
    assert later.session == (earlier.result_session or earlier.session)
    assert second.output[-1].id == f"cmp_{later.public_id}"


CLEARING_BETA = ["context-management-2025-06-27"]


@pytest.mark.parametrize("streamed", [False, True])
def test_anthropic_clear_tool_uses_clears_what_the_model_reads_and_reports_it(
    claude, upstream, streamed
):
    upstream.enqueue({"content": "Done.", "prompt_tokens": 9_000})
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 10_000},
        "keep": {"type": "tool_uses", "value": 2},
    }
    options = {
        "model": "fake-chat",
        "max_tokens": 1024,
        "tools": [TOOL],
        "messages": claude_conversation(6),
        "context_management": {"edits": [edit]},
        "betas": CLEARING_BETA,
    }
    if streamed:
        with claude.beta.messages.stream(**options) as stream:
            deltas = [event for event in stream if event.type == "message_delta"]
        applied = deltas[-1].context_management.applied_edits
    else:
        applied = claude.beta.messages.create(**options).context_management.applied_edits
    assert applied[0].type == "clear_tool_uses_20250919"
    assert applied[0].cleared_tool_uses == 4
    assert applied[0].cleared_input_tokens > 10_000
    sent = upstream.requests[-1]["messages"]
    results = [message["content"] for message in sent if message["role"] == "tool"]
    assert results[:4] == ["[Old tool result content cleared]"] * 4
    assert results[4] == file_text("src/4.txt")
    assert MIDDLE_MARKER not in json.dumps(sent)
    # The client keeps its history, and so does the store.
    stored = Session.objects.get().messages.values_list("content", flat=True)
    assert any(MIDDLE_MARKER in str(content) for content in stored)


@pytest.mark.parametrize(("uses", "cleared"), [(6, 4), (7, 0)])
def test_anthropic_clear_tool_uses_with_a_tool_uses_trigger(claude, upstream, uses, cleared):
    """Claude Code's edit: ``trigger: {type: tool_uses}``; the context holds six tool uses."""
    upstream.enqueue({"content": "Done.", "prompt_tokens": 9_000})
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": uses},
        "keep": {"type": "tool_uses", "value": 2},
        "clear_at_least": {"type": "input_tokens", "value": 1_000},
        "exclude_tools": ["GetTask"],
    }
    reply = claude.beta.messages.create(
        model="fake-chat",
        max_tokens=1024,
        tools=[TOOL],
        messages=claude_conversation(6),
        context_management={"edits": [edit]},
        betas=CLEARING_BETA,
    )
    assert reply.content[0].text == "Done."
    applied = reply.context_management.applied_edits
    sent = upstream.requests[-1]["messages"]
    results = [message["content"] for message in sent if message["role"] == "tool"]
    if not cleared:  # under its trigger: nothing cleared, nothing reported
        assert applied == []
        assert "[Old tool result content cleared]" not in results
        return
    [edit_done] = applied
    assert edit_done.cleared_tool_uses == cleared
    assert results[:cleared] == ["[Old tool result content cleared]"] * cleared


def test_a_bad_clear_tool_uses_trigger_is_named(claude, upstream):
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.beta.messages.create(
            model="fake-chat",
            max_tokens=64,
            messages=claude_conversation(1),
            context_management={
                "edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "turns"}}]
            },
            betas=CLEARING_BETA,
        )
    assert "context_management.edits.0.trigger: must be {type: input_tokens or tool_uses" in (
        refused.value.message
    )
    assert not upstream.requests


# -- the sealed item: authenticated encryption (AES-GCM, key from SECRET_KEY by HKDF) ----------


def decoded(token: str) -> bytes:
    """The raw bytes of a sealed item (after its version tag)."""
    tag, _, body = token.partition(".")
    assert tag == "hwc1"
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def encoded(raw: bytes) -> str:
    return "hwc1." + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def readable_parts(token: str) -> list[bytes]:
    """Whatever a client could decode from the item without the key: every dot-separated
    part as base64, and zlib-inflated when it inflates."""
    parts = []
    for part in token.split("."):
        try:
            raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        except ValueError:
            continue
        parts.append(raw)
        with contextlib.suppress(zlib.error):
            parts.append(zlib.decompress(raw))
    return parts


def go_on_with(sdk, item: dict):
    return sdk.responses.create(
        model="fake-chat", input=[item, {"role": "user", "content": "Go on."}], tools=[READ_FILE]
    )


def test_the_sealed_item_is_encrypted_and_opens_only_as_it_was_sealed(sdk, upstream, alice):
    compacted = sdk.responses.compact(model="fake-chat", input=conversation())
    item = compaction_item(compacted.output)
    run = Compaction.objects.get()
    token = item["encrypted_content"]
    # Encrypted: the client cannot read which compaction (or whose) it names.
    assert not any(run.public_id.encode() in part for part in readable_parts(token))
    assert not any(b'"o"' in part for part in readable_parts(token))
    # A fresh nonce per seal: the same compaction sealed twice gives two different blobs.
    again = compaction_item(sdk.responses.compact(model="fake-chat", input=conversation()).output)
    assert again["encrypted_content"] != token

    # Round trip: sent back unchanged, it opens.
    upstream.enqueue({"content": "Going on.", "prompt_tokens": 9_000})
    assert go_on_with(sdk, item).output_text == "Going on."
    sessions = Session.objects.count()

    # One byte changed anywhere (nonce, ciphertext or tag): refused, never decoded.
    raw = decoded(token)
    for position in (0, len(raw) // 2, len(raw) - 1):
        flipped = bytearray(raw)
        flipped[position] ^= 0x01
        with pytest.raises(openai.BadRequestError) as refused:
            go_on_with(sdk, {**item, "encrypted_content": encoded(bytes(flipped))})
        assert refused.value.status_code == 400
        assert refused.value.code == "invalid_encrypted_content"
        assert refused.value.param == "input[0].encrypted_content"
        assert "input[0].encrypted_content" in refused.value.message
    # Cut short, or not ours at all.
    for bad in (token[:20], "hwc1.!!!", "gAAAAABnot-a-fernet-token", ""):
        with pytest.raises(openai.BadRequestError) as refused:
            go_on_with(sdk, {**item, "encrypted_content": bad})
        assert refused.value.code == "invalid_encrypted_content"
    assert Session.objects.count() == sessions  # nothing stored for a refusal


def test_an_item_sealed_under_another_secret_key_is_refused(sdk, upstream, alice, settings):
    sdk.responses.compact(model="fake-chat", input=conversation())
    run = Compaction.objects.get()
    current = settings.SECRET_KEY
    settings.SECRET_KEY = "another-server-" + "x" * 50
    foreign = compacting.item(run, alice.pk)
    settings.SECRET_KEY = current
    with pytest.raises(openai.BadRequestError) as refused:
        go_on_with(sdk, foreign)
    assert refused.value.status_code == 400
    assert refused.value.code == "invalid_encrypted_content"
    assert refused.value.param == "input[0].encrypted_content"

    # While keys rotate, an item sealed under a key kept in SECRET_KEY_FALLBACKS still opens.
    settings.SECRET_KEY_FALLBACKS = ["another-server-" + "x" * 50]
    upstream.enqueue({"content": "Going on.", "prompt_tokens": 9_000})
    assert go_on_with(sdk, foreign).output_text == "Going on."


# -- Anthropic clear_thinking_20251015 ----------------------------------------------------------


def thinking_turns(turns: int = 3) -> list[dict]:
    """``turns`` question/answer rounds whose answers each open with a signed thinking block
    (its text names the round), ending with a user turn."""
    messages: list[dict] = []
    for number in range(turns):
        messages += [
            {"role": "user", "content": f"Question {number}?"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": f"Pondering round {number}: " + "weigh it. " * 40,
                        "signature": f"sig{number}",
                    },
                    {"type": "text", "text": f"Answer {number}."},
                ],
            },
        ]
    messages.append({"role": "user", "content": "And finally?"})
    return messages


def sent_thinking(request: dict) -> list[str]:
    """The thinking texts an Anthropic upstream got, assistant turn by turn ('' for none)."""
    return [
        " ".join(
            block.get("thinking", "")
            for block in message["content"]
            if isinstance(block, dict) and block.get("type") == "thinking"
        )
        if isinstance(message["content"], list)
        else ""
        for message in request["messages"]
        if message["role"] == "assistant"
    ]


@pytest.fixture
def claude_upstream(settings):
    # A name litellm knows takes thinking (it refuses the parameter for unknown models).
    server = serve_for(settings, context_length=None)
    yield server
    server.stop()


@pytest.mark.parametrize("keep", [None, 2, "all"])
def test_anthropic_clear_thinking_keeps_the_newest_thinking_turns_and_reports_it(
    live_server, alice, claude_upstream, keep
):
    client = anthropic.Anthropic(base_url=live_server.url, api_key=issue_key(alice), max_retries=0)
    edit: dict = {"type": "clear_thinking_20251015"}
    if keep == "all":
        edit["keep"] = "all"
    elif keep is not None:
        edit["keep"] = {"type": "thinking_turns", "value": keep}
    tool_edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 100_000},
    }
    reply = client.beta.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=2048,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=thinking_turns(3),
        context_management={"edits": [edit, tool_edit]},
        betas=CLEARING_BETA,
    )
    thoughts = sent_thinking(claude_upstream.requests[-1])
    applied = reply.context_management.applied_edits
    if keep == "all":
        assert all(thought.startswith("Pondering round") for thought in thoughts)
        assert applied == []
        return
    kept = 1 if keep is None else keep  # Anthropic's default: the last thinking turn
    assert [bool(thought) for thought in thoughts] == [False] * (3 - kept) + [True] * kept
    assert thoughts[-1].startswith("Pondering round 2")
    assert len(applied) == 1  # the tool-use edit, under its trigger, cleared nothing
    assert applied[0].type == "clear_thinking_20251015"
    assert applied[0].cleared_thinking_turns == 3 - kept
    assert 100 * (3 - kept) < applied[0].cleared_input_tokens < 200 * (3 - kept)
    # Only the thinking went: every turn's answer reached the model.
    texts = json.dumps(claude_upstream.requests[-1]["messages"])
    assert all(f"Answer {number}." in texts for number in range(3))


def test_anthropic_clear_thinking_streamed_reports_its_edits_in_the_last_message_delta(
    live_server, alice, claude_upstream
):
    client = anthropic.Anthropic(base_url=live_server.url, api_key=issue_key(alice), max_retries=0)
    with client.beta.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=2048,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=thinking_turns(3),
        context_management={"edits": [{"type": "clear_thinking_20251015"}]},
        betas=CLEARING_BETA,
    ) as stream:
        events = list(stream)
        reply = stream.get_final_message()
    deltas = [event for event in events if event.type == "message_delta"]
    assert len(deltas) == 1
    assert events[-1].type == "message_stop"  # the delta is the stream's last word but one
    [applied] = deltas[0].context_management.applied_edits
    assert applied.type == "clear_thinking_20251015"
    assert applied.cleared_thinking_turns == 2  # all but the last thinking turn
    assert 200 < applied.cleared_input_tokens < 400
    # Nothing else of the stream carries it, and the SDK's final message has it.
    assert all(
        getattr(event, "context_management", None) is None
        for event in events
        if event.type != "message_delta"
    )
    assert reply.context_management.applied_edits == [applied]
    thoughts = sent_thinking(claude_upstream.requests[-1])
    assert [bool(thought) for thought in thoughts] == [False, False, True]


@pytest.mark.parametrize(
    ("edits", "where"),
    [
        (
            [{"type": "clear_tool_uses_20250919"}, {"type": "clear_thinking_20251015"}],
            "context_management.edits.1",  # not listed first
        ),
        ([{"type": "clear_thinking_20251015", "keep": "most"}], "context_management.edits.0.keep"),
        (
            [{"type": "clear_thinking_20251015", "keep": {"type": "tool_uses", "value": 1}}],
            "context_management.edits.0.keep",
        ),
    ],
)
def test_a_bad_clear_thinking_edit_is_named(live_server, alice, claude_upstream, edits, where):
    client = anthropic.Anthropic(base_url=live_server.url, api_key=issue_key(alice), max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.beta.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=64,
            messages=thinking_turns(1),
            context_management={"edits": edits},
            betas=CLEARING_BETA,
        )
    assert f"{where}:" in refused.value.message
    assert not claude_upstream.requests
    assert not Session.objects.exists()


# -- who asked: the inspector names the API request behind each of these compactions ------------


def test_the_inspector_shows_which_api_request_asked_for_the_compaction(
    sdk, claude, upstream, alice_client
):
    sdk.responses.compact(model="fake-chat", input=conversation())
    compact_on_demand(claude, claude_conversation())
    upstream.enqueue({"content": "Fine.", "prompt_tokens": 9_000})
    sdk.responses.create(
        model="fake-chat",
        input=[*conversation(), {"role": "user", "content": "More?"}],
        tools=[READ_FILE],
        context_management=[{"type": "compaction", "compact_threshold": 10_000}],
    )
    openai_compact, anthropic_on_demand, threshold = Compaction.objects.order_by("pk")
    assert openai_compact.asked_by["protocol"] == "openai"
    assert openai_compact.asked_by["endpoint"] == "/v1/responses/compact"
    assert openai_compact.asked_by["asked_with"] == "responses.compact"
    assert openai_compact.asked_by["key"] == "agent"  # the API key's name
    assert openai_compact.asked_by["client"].startswith("OpenAI/Python")
    assert anthropic_on_demand.asked_by["endpoint"] == "/v1/messages"
    assert anthropic_on_demand.asked_by["asked_with"] == "compaction summarize (on demand)"
    assert anthropic_on_demand.asked_by["client"].startswith("Anthropic/Python")
    assert threshold.asked_by["asked_with"] == "context_management compact_threshold 10,000"

    for run, words in [
        (openai_compact, "openai /v1/responses/compact responses.compact · API key “agent”"),
        (anthropic_on_demand, "anthropic /v1/messages compaction summarize (on demand)"),
        (threshold, "openai /v1/responses context_management compact_threshold 10,000"),
    ]:
        page = alice_client.get(reverse("compaction_detail", args=[run.public_id]))
        assert f'asked by <span class="mono who-asked">{words}' in page.content.decode()
        api = alice_client.get(f"/api/compactions/{run.public_id}")
        assert api.json()["asked_by"].startswith(words)
