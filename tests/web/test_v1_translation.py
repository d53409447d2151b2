"""Property tests of the protocol translations and of the canonical form matching compares
(no server, no database).

- Anthropic Messages: a conversation translated in (what we store and send) and out again
  by litellm's chat→Anthropic translation (what an Anthropic upstream receives) keeps its
  text, tool calls, tool results and images.
- Responses: input items translated in keep the same.
- Every protocol: a reply rendered in the protocol and sent back by the client is the very
  message we stored (the same canonical form), so the next request finds its session.
- Canonicalisation: what clients rewrite (argument spacing and key order, one text block
  for a string, cache_control, Claude Code's reminders) leaves the form equal; any change
  to what the model reads changes it.
"""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_web.openai_compat import anthropic as messages_api
from hermes_web.openai_compat import anthropic_native
from hermes_web.openai_compat import responses as responses_api
from hermes_web.openai_compat.matching import canonical, prefix_hashes
from hermes_web.openai_compat.upstream import Reply
from hermes_web.openai_compat.validation import ChatRequest

words = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=20)
texts = words.filter(lambda t: t.strip() and "<system-reminder>" not in t)
ids = st.from_regex(r"[A-Za-z0-9_]{4,12}", fullmatch=True)
names = st.from_regex(r"[a-z][a-z_]{1,10}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | words,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=8,
)
arguments = st.dictionaries(names, json_values, max_size=4)
images = st.builds(
    lambda data: {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": data},
    },
    st.from_regex(r"[A-Za-z0-9+/]{8,24}", fullmatch=True),
)


@st.composite
def anthropic_conversations(draw):
    """user/assistant turns; every tool_use is answered in the next user turn."""
    messages = []
    for _ in range(draw(st.integers(1, 4))):
        user = [{"type": "text", "text": draw(texts)}]
        if draw(st.booleans()):
            user.append(draw(images))
        pending = [
            b for b in (messages[-1]["content"] if messages else []) if b["type"] == "tool_use"
        ]
        results = []
        for call in pending:
            content = draw(st.sampled_from(["string", "blocks", "image"]))
            if content == "string":
                body = draw(texts)
            elif content == "blocks":
                body = [{"type": "text", "text": draw(texts)}]
            else:
                body = [{"type": "text", "text": draw(texts)}, draw(images)]
            results.append({"type": "tool_result", "tool_use_id": call["id"], "content": body})
        messages.append({"role": "user", "content": results + user})
        assistant = [{"type": "text", "text": draw(texts)}]
        for _ in range(draw(st.integers(0, 2))):
            assistant.append(
                {
                    "type": "tool_use",
                    "id": "toolu_" + draw(ids),
                    "name": draw(names),
                    "input": draw(arguments),
                }
            )
        ids_seen = [b["id"] for b in assistant if b["type"] == "tool_use"]
        if len(set(ids_seen)) != len(ids_seen):
            assistant = assistant[:1]
        messages.append({"role": "assistant", "content": assistant})
    if any(b["type"] == "tool_use" for b in messages[-1]["content"]):
        messages[-1]["content"] = messages[-1]["content"][:1]
    # Tool ids are unique over the conversation, as a model makes them.
    seen = [b["id"] for m in messages for b in m["content"] if b["type"] == "tool_use"]
    if len(set(seen)) != len(seen):
        messages = messages[:2] if len(messages) >= 2 else messages
        messages[-1]["content"] = messages[-1]["content"][:1]
    # A request ends with the user's turn.
    messages.append({"role": "user", "content": draw(texts)})
    return messages


def anthropic_facts(messages: list[dict]) -> list[tuple]:
    """What the model reads of an Anthropic conversation, block by block."""
    facts = []
    for message in messages:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            if block["type"] == "text":
                facts.append(("text", message["role"], block["text"]))
            elif block["type"] == "image":
                facts.append(("image", block["source"]["data"]))
            elif block["type"] == "tool_use":
                facts.append(
                    ("call", block["id"], block["name"], json.dumps(block["input"], sort_keys=True))
                )
            elif block["type"] == "tool_result":
                body = block.get("content")
                parts = [{"type": "text", "text": body}] if isinstance(body, str) else body or []
                for part in parts:
                    if part["type"] == "text":
                        facts.append(("result", block["tool_use_id"], part["text"]))
                    else:
                        facts.append(("result-image", block["tool_use_id"], part["source"]["data"]))
    return facts


@settings(max_examples=60, deadline=None)
@given(anthropic_conversations())
def test_an_anthropic_conversation_survives_in_and_out(conversation):
    chat = messages_api.to_chat({"model": "claude-x", "max_tokens": 10, "messages": conversation})
    from litellm.litellm_core_utils.prompt_templates.factory import anthropic_messages_pt

    back = anthropic_messages_pt(
        chat["messages"], model="claude-sonnet-4-5", llm_provider="anthropic"
    )
    assert anthropic_facts(back) == anthropic_facts(conversation)


@st.composite
def responses_inputs(draw):
    items = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": draw(texts)}],
        }
    ]
    for number in range(draw(st.integers(1, 3))):
        parts = [{"type": "input_text", "text": draw(texts)}]
        if draw(st.booleans()):
            parts.append({"type": "input_image", "image_url": "data:image/png;base64," + draw(ids)})
        items.append({"type": "message", "role": "user", "content": parts})
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": draw(texts)}],
            }
        )
        for call in range(draw(st.integers(0, 2))):
            call_id = f"call_{number}_{call}"
            items.append(
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": draw(names),
                    "arguments": json.dumps(draw(arguments)),
                }
            )
        for item in [
            i
            for i in items
            if i.get("type") == "function_call"
            and not any(
                o.get("call_id") == i["call_id"] and o["type"] == "function_call_output"
                for o in items
            )
        ]:
            items.append(
                {"type": "function_call_output", "call_id": item["call_id"], "output": draw(texts)}
            )
    return items


def responses_facts(items: list[dict]) -> list[tuple]:
    facts = []
    for item in items:
        if item["type"] == "message":
            for part in item["content"]:
                if part["type"] == "input_image":
                    facts.append(("image", part["image_url"]))
                else:
                    facts.append(
                        (
                            "text",
                            "system" if item["role"] == "developer" else item["role"],
                            part["text"],
                        )
                    )
        elif item["type"] == "function_call":
            facts.append(("call", item["call_id"], item["name"], json.loads(item["arguments"])))
        else:
            facts.append(("result", item["call_id"], item["output"]))
    return facts


def chat_facts(messages: list[dict]) -> list[tuple]:
    facts = []
    for message in messages:
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        role = "system" if message["role"] == "developer" else message["role"]
        for part in parts:
            if part["type"] == "image_url":
                facts.append(("image", part["image_url"]["url"]))
            elif message["role"] == "tool":
                facts.append(("result", message["tool_call_id"], part["text"]))
            else:
                facts.append(("text", role, part["text"]))
        for call in message.get("tool_calls") or ():
            facts.append(
                (
                    "call",
                    call["id"],
                    call["function"]["name"],
                    json.loads(call["function"]["arguments"]),
                )
            )
    return facts


@settings(max_examples=60, deadline=None)
@given(responses_inputs())
def test_responses_input_items_survive_the_translation(items):
    chat = responses_api.to_chat({"model": "m", "input": items}, [])
    assert chat_facts(chat["messages"]) == responses_facts(items)


replies = st.builds(
    lambda text, calls: Reply(
        id="chatcmpl-drawn",  # the default draws from random, which a strategy must not use
        content=text,
        tool_calls=[
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, separators=(",", ":"))},
            }
            for n, (name, args) in enumerate(calls)
        ],
        finish_reason="tool_calls" if calls else "stop",
    ),
    texts,
    st.lists(st.tuples(names, arguments), max_size=3),
)


@settings(max_examples=80, deadline=None)
@given(replies)
def test_a_rendered_reply_sent_back_is_the_stored_message_in_every_protocol(reply):
    stored = canonical(reply.message())
    request = ChatRequest(
        model="m", messages=[], extra={"id": "msg_1", "response_id": "resp_1", "echo": {}}
    )
    # Anthropic: the content blocks come back as the assistant turn.
    blocks = messages_api.render(request, reply)["content"]
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": blocks}]
    if reply.tool_calls:
        history.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": c["id"], "content": "ok"}
                    for c in reply.tool_calls
                ],
            }
        )
    chat = messages_api.to_chat({"model": "m", "max_tokens": 5, "messages": history})
    assert canonical(chat["messages"][1]) == stored
    # Responses: the output items come back in the next input.
    output = responses_api.render(request, reply)["output"]
    items = [{"type": "message", "role": "user", "content": "q"}, *output]
    items += [
        {"type": "function_call_output", "call_id": c["id"], "output": "ok"}
        for c in reply.tool_calls
    ]
    chat = responses_api.to_chat({"model": "m", "input": items}, [])
    assert canonical(chat["messages"][1]) == stored


messages_with_calls = st.builds(
    lambda text, call_id, name, args: {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    },
    texts,
    ids,
    names,
    arguments,
)


@settings(max_examples=120, deadline=None)
@given(messages_with_calls, st.randoms())
def test_rewrites_clients_make_keep_the_canonical_form(message, random):
    args = json.loads(message["tool_calls"][0]["function"]["arguments"])
    keys = list(args)
    random.shuffle(keys)
    rewritten = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": message["content"], "cache_control": {"type": "ephemeral"}}
        ],
        "tool_calls": [
            {
                **message["tool_calls"][0],
                "function": {
                    "name": message["tool_calls"][0]["function"]["name"],
                    "arguments": json.dumps(
                        {k: args[k] for k in keys}, separators=(",", ":"), ensure_ascii=False
                    ),
                },
            }
        ],
        "refusal": None,
    }
    assert canonical(rewritten) == canonical(message)
    user = {"role": "user", "content": message["content"]}
    reminded = {
        "role": "user",
        "content": [
            {"type": "text", "text": "<system-reminder>todo: 2</system-reminder>"},
            {"type": "text", "text": message["content"]},
        ],
    }
    assert canonical(reminded) == canonical(user)


def _changed(message: dict, what: str, extra: str) -> dict:
    changed = json.loads(json.dumps(message))
    call = changed["tool_calls"][0]
    if what == "text":
        changed["content"] = message["content"] + extra
    elif what == "id":
        call["id"] += extra
    elif what == "name":
        call["function"]["name"] += extra
    elif what == "argument":
        args = json.loads(call["function"]["arguments"])
        args["zz_" + extra] = extra
        call["function"]["arguments"] = json.dumps(args)
    elif what == "role":
        changed = {"role": "user", "content": message["content"]}
    elif what == "parts":
        changed["content"] = [
            {"type": "text", "text": message["content"]},
            {"type": "text", "text": extra},
        ]
    return changed


@settings(max_examples=150, deadline=None)
@given(
    messages_with_calls,
    st.sampled_from(["text", "id", "name", "argument", "role", "parts"]),
    st.from_regex(r"[a-z0-9]{1,5}", fullmatch=True),
)
def test_canonicalisation_never_merges_different_messages(message, what, extra):
    changed = _changed(message, what, extra)
    assert canonical(changed) != canonical(message)
    # And two conversations that differ anywhere never share a prefix hash past that point.
    first = [{"role": "user", "content": "q"}, message]
    second = [{"role": "user", "content": "q"}, changed]
    assert prefix_hashes(first)[1] != prefix_hashes(second)[1]


native_blocks = st.one_of(
    st.builds(lambda text: {"type": "text", "text": text}, texts),
    st.builds(
        lambda thought, signature: {
            "type": "thinking",
            "thinking": thought,
            "signature": signature,
        },
        texts,
        ids,
    ),
    st.builds(lambda data: {"type": "redacted_thinking", "data": data}, ids),
    st.builds(
        lambda call_id, name, args: {
            "type": "tool_use",
            "id": call_id,
            "name": name,
            "input": args,
        },
        ids,
        names,
        arguments,
    ),
    st.builds(
        lambda call_id, query: [
            {"type": "server_tool_use", "id": call_id, "name": "web_search", "input": {"q": query}},
            {"type": "web_search_tool_result", "tool_use_id": call_id, "content": []},
        ],
        ids,
        texts,
    ),
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(native_blocks, min_size=1, max_size=5).filter(
        lambda blocks: any(
            not isinstance(b, list) and b["type"] in ("text", "tool_use") for b in blocks
        )
    )
)
def test_a_native_reply_sent_back_is_the_stored_message(drawn):
    """An Anthropic model's own message (anthropic_native), as stored, is what the client's
    copy of it translates to, whatever blocks it holds and in whatever order."""
    blocks = [block for item in drawn for block in (item if isinstance(item, list) else [item])]
    seen: set[str] = set()
    for block in blocks:  # one id per call, as a model writes them
        if block["type"] == "tool_use":
            block["id"] = f"{block['id']}_{len(seen)}"
            seen.add(block["id"])
    reply = anthropic_native.reply_of({"content": blocks, "usage": {}})
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": blocks}]
    if seen:
        results = [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in seen]
        history.append({"role": "user", "content": results})
    chat = messages_api.to_chat({"model": "m", "max_tokens": 5, "messages": history})
    assert canonical(chat["messages"][1]) == canonical(reply.message())
