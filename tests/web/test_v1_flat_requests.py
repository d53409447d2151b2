"""Work a request repeats for the history its conversation already sent is done once per
process: the pairing of tool calls is checked for what the client added (the remembered
history had every call answered), the history is compared with the remembered one once."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import validate_tool_pairs
from hermes_web.openai_compat import anthropic as messages_api
from hermes_web.openai_compat import matching, validation
from hermes_web.openai_compat import responses as responses_api
from hermes_web.openai_compat.contexts import StoredContext
from hermes_web.openai_compat.errors import ApiError
from hermes_web.openai_compat.matching import RecentHistories, prefix_hashes
from hermes_web.openai_compat.service import (
    _ToolNames,
    merge_repeated_results,
    restore_dropped_calls,
    with_new_messages,
)
from hermes_web.openai_compat.translations import Translations
from hermes_web.openai_compat.validation import request_from
from tests.web.test_v1_recent_histories import history
from tests.web.test_v1_translation import anthropic_conversations, responses_inputs


@pytest.fixture
def recent(monkeypatch):
    fresh = RecentHistories()
    monkeypatch.setattr(matching, "RECENT", fresh)
    monkeypatch.setattr(validation, "RECENT", fresh)
    return fresh


@pytest.fixture
def paired(monkeypatch):
    """The length of every list whose tool pairing is checked."""
    lengths: list[int] = []
    real = validation.validate_tool_pairs

    def counting(messages):
        lengths.append(len(messages))
        return real(messages)

    monkeypatch.setattr(validation, "validate_tool_pairs", counting)
    return lengths


def test_a_grown_history_has_only_its_added_messages_paired(recent, paired):
    request_from({"model": "m", "messages": history(50)})
    grown = copy.deepcopy(history(52))
    request = request_from({"model": "m", "messages": grown})
    assert paired == [102, 4]
    # What it knew is handed on: the prefix hashes are the same as computed from scratch.
    assert recent.prefix_hashes(grown, request.known) == prefix_hashes(grown)


def test_a_broken_pair_after_the_remembered_history_is_refused_and_named_in_place(recent):
    messages = history(10)
    request_from({"model": "m", "messages": messages})
    # A second result for a call the remembered part already answered.
    again = copy.deepcopy(messages) + [{"role": "tool", "tool_call_id": "call_9", "content": "x"}]
    with pytest.raises(ApiError) as refused:
        request_from({"model": "m", "messages": again})
    assert "message 22: tool result 'call_9' does not follow its call" in str(
        refused.value.payload()
    )
    # A call whose result the request does not hold.
    pending = copy.deepcopy(history(11))[:-1]
    with pytest.raises(ApiError) as refused:
        request_from({"model": "m", "messages": pending})
    assert "end: calls ['call_10'] have no result" in str(refused.value.payload())


def test_a_history_that_differs_inside_the_remembered_one_is_paired_whole(recent, paired):
    request_from({"model": "m", "messages": history(10)})
    changed = copy.deepcopy(history(11))
    changed[5]["content"] = "another result"
    request_from({"model": "m", "messages": changed})
    assert paired == [22, 24]


def test_the_characters_kept_grow_by_what_each_request_added(recent):
    first = history(20)
    recent.prefix_hashes(first)
    grown = copy.deepcopy(history(21))
    recent.prefix_hashes(grown, recent.lookup(grown))
    assert recent._entries.chars == sum(matching._size(m.get("content")) for m in grown)


# -- Anthropic Messages: a conversation's translation is extended, not redone ---------------

SYSTEMS = st.sampled_from(
    [
        None,
        "You are Claude Code.",
        [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
    ]
)


@settings(max_examples=60, deadline=None)
@given(anthropic_conversations(), SYSTEMS, st.data())
def test_translating_what_a_conversation_added_equals_translating_it_whole(
    conversation, system, data
):
    body = {"model": "claude-x", "max_tokens": 10, "messages": conversation}
    if system is not None:
        body["system"] = system
    split = data.draw(st.integers(0, len(conversation)))
    _, done, ends = messages_api.translate_body({**body, "messages": conversation[:split]})
    assert messages_api.translate_body(body, split, done, ends)[0] == messages_api.to_chat(body)
    # From any earlier message whose translation's end is known, too.
    known = [at for at in range(split + 1) if ends[at] >= 0]
    since = data.draw(st.sampled_from(known))
    again = messages_api.translate_body(body, since, done[: ends[since]], ends[: since + 1])
    assert again[0] == messages_api.to_chat(body)


@pytest.fixture
def translated(monkeypatch):
    fresh = Translations()
    monkeypatch.setattr(messages_api, "TRANSLATED", fresh)
    return fresh


def claude_body(turns: int, **fields) -> dict:
    """A Claude Code-shaped request: a tool call and its result per turn."""
    messages: list[dict] = [{"role": "user", "content": "Trace the router."}]
    for turn in range(turns):
        use = {"type": "tool_use", "id": f"toolu_{turn}", "name": "read", "input": {"n": turn}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": f"x{turn}"}
        messages += [
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ]
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": messages,
        "tools": [{"name": "read", "input_schema": {"type": "object"}}],
        **fields,
    }


def parsed(body: dict) -> list[dict]:
    return messages_api.parse(json.dumps(body).encode()).messages


def test_a_grown_claude_history_translates_only_what_it_added(recent, translated, monkeypatch):
    parsed(claude_body(30))
    sizes: list[int] = []
    real = messages_api._translate

    def counting(body):
        sizes.append(len(body["messages"]))
        return real(body)

    monkeypatch.setattr(messages_api, "_translate", counting)
    grown = claude_body(31)
    messages = parsed(grown)
    assert sizes == [0, 1, 1]  # the body without messages; the two messages added
    fresh = Translations()
    monkeypatch.setattr(messages_api, "TRANSLATED", fresh)
    assert messages == parsed(grown)
    assert sizes[3:] == [0, 59, 1, 1, 1, 1]  # a fresh process translates it all


def test_claude_codes_moving_cache_mark_translates_from_the_message_it_left(
    recent, translated, monkeypatch
):
    body = claude_body(20)
    mark = {"type": "ephemeral"}
    body["messages"][-1]["content"][0]["cache_control"] = mark
    parsed(body)
    sizes: list[int] = []
    real = messages_api._translate
    monkeypatch.setattr(
        messages_api, "_translate", lambda body: sizes.append(len(body["messages"])) or real(body)
    )
    grown = claude_body(21)  # the mark moved to the newest message
    grown["messages"][-1]["content"][0]["cache_control"] = mark
    messages = parsed(grown)
    assert sizes == [0, 1, 1, 1]  # the message that lost its mark, and the two added
    monkeypatch.setattr(messages_api, "TRANSLATED", Translations())
    assert parsed(grown) == messages


def test_anything_else_that_changed_translates_the_history_whole(recent, translated, monkeypatch):
    parsed(claude_body(5))
    sizes: list[int] = []
    real = messages_api._translate
    monkeypatch.setattr(
        messages_api, "_translate", lambda body: sizes.append(len(body["messages"])) or real(body)
    )
    rewritten = claude_body(6)
    rewritten["messages"][3]["content"][0]["content"] = "another result"
    parsed(rewritten)
    other_system = claude_body(6, system="Another system prompt.")
    assert parsed(other_system)[0] == {"role": "system", "content": "Another system prompt."}
    # Message 3 was translated within the first request's piece: all is translated again.
    assert sizes == [0, 9, 1, 1, 1, 1] * 2


def test_a_bad_message_added_to_a_remembered_history_is_refused_and_named(recent, translated):
    parsed(claude_body(5))
    bad = claude_body(5)
    bad["messages"].append({"role": "user", "content": "a\x00b"})
    with pytest.raises(ApiError) as refused:
        parsed(bad)
    assert "body.messages[11].content" in str(refused.value.payload())
    unknown = claude_body(5)
    unknown["messages"].append({"role": "user", "content": [{"type": "video"}]})
    with pytest.raises(ApiError) as refused:
        parsed(unknown)
    assert "messages.11.content[0].type" in str(refused.value.payload())


# -- Responses: store: false input items, extended where they translate alone ---------------


@settings(max_examples=80, deadline=None)
@given(responses_inputs(), st.sampled_from([None, "Be brief."]), st.data())
def test_responses_items_added_translate_alone_to_what_the_whole_input_gives(
    items, instructions, data
):
    body = {"model": "m", "input": items, "store": False}
    if instructions:
        body["instructions"] = instructions
    split = data.draw(st.integers(1, len(items)))
    _, done = responses_api.translate_body({**body, "input": items[:split]}, [])
    if responses_api.extendable(items, split, done):
        extended = responses_api.translate_body(body, [], split, done)[0]
        assert extended == responses_api.to_chat(body, [])


def codex_body(turns: int, *extra: dict) -> dict:
    """A Codex-shaped request (store: false, the full input): a call and its output a turn."""
    items: list[dict] = [{"type": "message", "role": "user", "content": "Trace the router."}]
    for turn in range(turns):
        items.append(
            {"type": "function_call", "call_id": f"call_{turn}", "name": "read", "arguments": "{}"}
        )
        items.append({"type": "function_call_output", "call_id": f"call_{turn}", "output": "x"})
    return {
        "model": "openai/fake-chat",
        "instructions": "You are Codex.",
        "input": items + list(extra),
        "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}}],
        "store": False,
    }


@pytest.fixture
def translated_items(monkeypatch):
    fresh = Translations()
    monkeypatch.setattr(responses_api, "TRANSLATED", fresh)
    return fresh


@pytest.fixture
def translator_sizes(monkeypatch):
    """How many items each call of litellm's Responses translation got."""
    sizes: list[int] = []
    real = responses_api._translator()

    class Counting:
        @staticmethod
        def transform_responses_api_input_to_messages(items, **kwargs):
            sizes.append(len(items))
            return real.transform_responses_api_input_to_messages(items, **kwargs)

    monkeypatch.setattr(responses_api, "_translator", lambda: Counting)
    return sizes


def responses_parsed(body: dict) -> list[dict]:
    return responses_api.parse_for(None)(json.dumps(body).encode()).messages


def test_a_grown_codex_input_translates_only_what_it_added(
    recent, translated_items, translator_sizes, monkeypatch
):
    responses_parsed(codex_body(30))
    grown = codex_body(31)
    messages = responses_parsed(grown)
    assert translator_sizes == [61, 2]
    monkeypatch.setattr(responses_api, "TRANSLATED", Translations())
    assert responses_parsed(grown) == messages
    assert translator_sizes[-1] == 63


def test_items_that_do_not_translate_alone_translate_the_whole_input(
    recent, translated_items, translator_sizes
):
    responses_parsed(codex_body(3))
    # An output whose call the remembered input holds: litellm looks the call up there.
    late = {"type": "function_call_output", "call_id": "call_2", "output": "again"}
    with pytest.raises(ApiError):  # (a second result for one call is refused afterwards)
        responses_parsed(codex_body(3, late))
    reply = {"type": "message", "role": "assistant", "content": "Done."}
    responses_parsed(codex_body(3, reply))  # after an output: the reply translates alone
    call = {"type": "function_call", "call_id": "call_9", "name": "read", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "call_9", "output": "y"}
    responses_parsed(codex_body(3, reply, call, output))  # the call joins the reply
    reasoning = {"type": "reasoning", "summary": [], "encrypted_content": "e"}
    responses_parsed(codex_body(3, reply, call, output, reasoning))  # it may look back
    assert translator_sizes == [7, 8, 1, 10, 10]


def test_a_bad_item_added_to_a_remembered_input_is_refused_and_named(recent, translated_items):
    responses_parsed(codex_body(3))
    with pytest.raises(ApiError) as refused:
        responses_parsed(codex_body(3, {"type": "message", "role": "user", "content": "a\x00b"}))
    assert "input[7].content" in str(refused.value.payload())
    with pytest.raises(ApiError) as refused:
        responses_parsed(codex_body(3, {"type": "web_search_call"}))
    assert "input[7].type" in str(refused.value.payload())


# -- the compacted context and the messages a request added ---------------------------------

call_ids = st.sampled_from(["c1", "c2", "c3", "c4"])
chat_messages = st.one_of(
    st.builds(lambda text: {"role": "user", "content": text}, st.sampled_from(["a", "b"])),
    st.builds(
        lambda ids: {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for i in ids
            ],
        },
        st.lists(call_ids, min_size=1, max_size=2, unique=True),
    ),
    st.builds(
        lambda i, text: {"role": "tool", "tool_call_id": i, "content": text},
        call_ids,
        st.sampled_from(["stub", "real"]),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(chat_messages, max_size=8), st.lists(chat_messages, max_size=5))
def test_the_stored_context_and_new_messages_are_what_the_whole_list_gives(stored, new):
    context = StoredContext(
        session_pk=1,
        compaction_pk=1,
        version=datetime.now(UTC),
        chain=(1,),
        messages=tuple(stored),
        last_position=len(stored),
        results=frozenset(m["tool_call_id"] for m in stored if m["role"] == "tool"),
        calls=frozenset(c["id"] for m in stored for c in m.get("tool_calls") or ()),
        failed=frozenset(),
        chars=0,
        paired=not validate_tool_pairs(stored),
    )
    history = stored + new
    whole = restore_dropped_calls(merge_repeated_results(stored + new), history)
    assert with_new_messages(context, list(stored), new, history) == (
        whole,
        validate_tool_pairs(whole),
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(call_ids, st.sampled_from(["read", "grep", ""])), max_size=3),
        max_size=6,
    ),
    call_ids,
)
def test_a_results_tool_name_is_its_last_calls_as_a_walk_of_the_whole_history_gives(turns, asked):
    messages = [
        {
            "role": "assistant",
            "tool_calls": [{"id": i, "function": {"name": name}} for i, name in calls],
        }
        for calls in turns
    ]
    walked = {}
    for message in messages:
        for call in message["tool_calls"]:
            walked[call["id"]] = call["function"]["name"]
    assert _ToolNames(messages).get(asked, "") == walked.get(asked, "")


def attached_by_walking(messages: list[dict], anchors: list) -> list[dict]:
    """Each reasoning item on the first assistant message that matches, looked up from the
    start for each item (what ``attach_reasoning`` gives, the slow way)."""
    for (kind, key), item in anchors:
        for message in messages:
            if message.get("role") != "assistant":
                continue
            calls = {call.get("id") for call in message.get("tool_calls") or ()}
            if (kind == "call" and key in calls) or (
                kind == "text" and key and responses_api._text_of(message.get("content")) == key
            ):
                message.setdefault("reasoning_items", []).append(item)
                break
    return messages


reply_texts = st.sampled_from(["", "Done.", "Reading."])
assistant_turns = st.builds(
    lambda text, ids: {
        "role": "assistant",
        "content": text or None,
        **({"tool_calls": [{"id": i, "type": "function"} for i in ids]} if ids else {}),
    },
    reply_texts,
    st.lists(call_ids, max_size=2, unique=True),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(assistant_turns, st.just({"role": "user", "content": "Done."}))),
    st.lists(st.tuples(st.sampled_from(["call", "text"]), call_ids | reply_texts), max_size=5),
)
def test_reasoning_items_go_where_a_walk_from_the_start_puts_them(messages, anchors):
    anchored = [
        ((kind, key), {"type": "reasoning", "n": n}) for n, (kind, key) in enumerate(anchors)
    ]
    expected = attached_by_walking(copy.deepcopy(messages), anchored)
    assert responses_api.attach_reasoning(copy.deepcopy(messages), anchored) == expected
