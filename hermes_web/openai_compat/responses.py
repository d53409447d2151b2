"""``POST /v1/responses`` (OpenAI Responses): a thin adapter onto the same conversation
service as chat completions, for Codex CLI and openai-agents.

``input`` items become chat messages through litellm's own Responses translation
(``LiteLLMCompletionResponsesConfig.transform_responses_api_input_to_messages``: a message
with its parts, ``function_call`` merged into the assistant message before it,
``function_call_output`` as a tool message). ``reasoning`` items are not given to it (it
turns their summary into a *user* message): they ride along with the assistant message
they precede (``reasoning_items``, stored in its row's ``extra``, Codex's
``encrypted_content`` included) and are left out of what is sent upstream (a
chat-completions model cannot take them back) and of what is compared. Reasoning the
upstream returns is echoed as a ``reasoning`` output item (``reasoning_text`` content). Function tools (flat or inside a
``namespace`` group) become chat tools here; built-in tools (``web_search``, ``local_shell``,
``custom``…) are dropped, as a chat-completions model cannot run them. The reply, whole or
streamed, is written back as Responses output items here.

``store`` (the default) keeps the reply's response id with the stored reply, so a later
request may send only its new input with ``previous_response_id``; with ``store: false``
(Codex) the client sends its full input each time and matching works as for chat.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import random
import time
from collections.abc import Iterator
from typing import Any

from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from compaction import CompactionConfig, count_messages_tokens
from hermes_web import validation
from hermes_web.models import ApiKey, Message
from hermes_web.openai_compat import compacting, fields, service, views
from hermes_web.openai_compat.errors import ApiError, invalid, scrub
from hermes_web.openai_compat.translations import RESPONSES as TRANSLATED
from hermes_web.openai_compat.translations import conversation_key
from hermes_web.openai_compat.upstream import (
    Reply,
    StreamGatherer,
    _import_litellm,
    resolve_model,
)
from hermes_web.openai_compat.validation import ChatRequest, load_body, request_from

log = logging.getLogger(__name__)

ITEM_TYPES = (
    "message",
    "function_call",
    "function_call_output",
    "reasoning",
    "compaction",
    "compaction_trigger",
)
PART_TYPES = ("input_text", "output_text", "input_image", "text", "refusal", "input_file")
# Sampling parameters with the same meaning in chat completions.
PASSED_ON = ("temperature", "top_p", "parallel_tool_calls", "user", "seed")


@functools.cache
def _translator() -> Any:
    _import_litellm()
    from litellm.responses.litellm_completion_transformation.transformation import (
        LiteLLMCompletionResponsesConfig,
    )

    return LiteLLMCompletionResponsesConfig


def _check_input(items: Any, start: int = 0) -> None:
    if isinstance(items, str):
        return
    if not isinstance(items, list):
        raise invalid(
            "input: must be a string or an array of items.", code="invalid_type", param="input"
        )
    for index in range(start, len(items)):
        item = items[index]
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise invalid(f"{where}: must be an object.", code="invalid_type", param=where)
        kind = item.get("type", "message")
        if kind not in ITEM_TYPES:
            raise invalid(
                f"{where}.type must be one of {', '.join(ITEM_TYPES)}; got {kind!r}.",
                code="invalid_value",
                param=f"{where}.type",
            )
        if kind == "compaction_trigger" and index != len(items) - 1:
            raise invalid(
                f"{where}: a compaction_trigger item must be the last input item.",
                code="invalid_value",
                param=where,
            )
        if kind == "message":
            if item.get("role") not in ("user", "assistant", "system", "developer"):
                raise invalid(
                    f"{where}.role must be user, assistant, system or developer.",
                    code="invalid_value",
                    param=f"{where}.role",
                )
            content = item.get("content")
            if not isinstance(content, str | list):
                raise invalid(
                    f"{where}.content must be a string or an array.",
                    code="invalid_type",
                    param=where,
                )
            for number, part in enumerate(content if isinstance(content, list) else ()):
                part_type = part.get("type") if isinstance(part, dict) else None
                if part_type not in PART_TYPES:
                    raise invalid(
                        f"{where}.content[{number}].type must be one of {', '.join(PART_TYPES)}; "
                        f"got {part_type!r}.",
                        code="invalid_value",
                        param=f"{where}.content[{number}].type",
                    )
        elif kind == "function_call":
            if not all(
                isinstance(item.get(name), str) for name in ("call_id", "name")
            ) or not isinstance(item.get("arguments", ""), str):
                raise invalid(
                    f"{where}: a function_call needs string call_id, name and arguments.",
                    code="invalid_value",
                    param=where,
                )
        elif kind == "function_call_output" and (
            not isinstance(item.get("call_id"), str)
            or not isinstance(item.get("output"), str | list)
        ):
            raise invalid(
                f"{where}: a function_call_output needs a string call_id and an output.",
                code="invalid_value",
                param=where,
            )


def chat_tools(tools: Any) -> list[dict[str, Any]]:
    """Responses function tools (flat, or inside ``namespace`` groups) as chat tools."""
    out: list[dict[str, Any]] = []
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            out += chat_tools(tool.get("tools"))
        elif tool.get("type") == "function" and isinstance(tool.get("name"), str):
            function = {
                "name": tool["name"],
                "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
            }
            if isinstance(tool.get("description"), str):
                function["description"] = tool["description"]
            out.append({"type": "function", "function": function})
    return out


def chat_tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict) and choice.get("type") == "function" and choice.get("name"):
        return {"type": "function", "function": {"name": choice["name"]}}
    if choice in ("auto", "none", "required"):
        return choice
    return None


def _previous_history(previous: str, key_owner_id: int) -> list[dict]:
    """The conversation up to and including the stored reply ``previous`` (a response id),
    as the client would have sent it."""
    reply = (
        Message.objects.filter(
            session__owner_id=key_owner_id, role="assistant", extra__response_id=previous
        )
        .select_related("session")
        .first()
    )
    if reply is None:
        raise ApiError(
            404,
            f"Previous response with id '{previous}' not found.",
            code="previous_response_not_found",
            param="previous_response_id",
        )
    rows = (
        Message.objects.filter(session_id=reply.session_id, position__lte=reply.position)
        .filter(archived=False)
        .order_by("position")
        .values_list(*Message.ENGINE_COLUMNS)
    )
    return [Message.engine_dict(*row) for row in rows]


def to_chat(data: dict[str, Any], history: list[dict]) -> dict[str, Any]:
    """A checked Responses body as a chat-completions body."""
    return translate_body(data, history)[0]


def translate_body(
    data: dict[str, Any], history: list[dict], start: int = 0, done: list[dict] | None = None
) -> tuple[dict[str, Any], list[dict]]:
    """``to_chat``, and the translation of ``input`` alone. ``done``: the translation of
    the first ``start`` items, from the same conversation's previous request, when
    ``extendable`` says the rest translates alone to what follows it."""
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise invalid(
            "Missing required parameter: 'model'.", code="missing_required_parameter", param="model"
        )
    items = data.get("input")
    if items is None:
        raise invalid(
            "Missing required parameter: 'input'.", code="missing_required_parameter", param="input"
        )
    _check_input(items, start)
    instructions = data.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise invalid("instructions: must be a string.", code="invalid_type", param="instructions")
    try:
        if isinstance(items, list):
            for index in range(start, len(items)):
                validation.check_text(items[index], f"input[{index}]", 1)
        else:
            validation.check_text(items, "input")
    except validation.Invalid as error:
        raise invalid(str(error), code="invalid_value", param="input") from None
    anchors: list[tuple[tuple[str, str], dict]] = []
    if isinstance(items, list):
        items = items[start:]
        anchors = reasoning_anchors(items)
        items = [item for item in items if item.get("type") != "reasoning"]
    # The instructions are the first message: translated with the first item only.
    request = {"instructions": instructions} if not history and not start else {}
    try:
        messages = _translator().transform_responses_api_input_to_messages(
            items, responses_api_request=request
        )
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise invalid(
            f"This Responses request could not be translated ({scrub(str(error))}).",
            code="invalid_value",
        ) from None
    messages = (done or []) + attach_reasoning([_plain(message) for message in messages], anchors)
    body: dict[str, Any] = {
        "model": model,
        "messages": history + messages,
        "stream": bool(data.get("stream")),
    }
    body.update({name: data[name] for name in PASSED_ON if data.get(name) is not None})
    if isinstance(data.get("max_output_tokens"), int):
        body["max_tokens"] = data["max_output_tokens"]
    tools = chat_tools(data.get("tools"))
    if tools:
        body["tools"] = tools
        choice = chat_tool_choice(data.get("tool_choice"))
        if choice is not None:
            body["tool_choice"] = choice
    else:
        body.pop("parallel_tool_calls", None)
    return body, messages


def extendable(items: list[Any], start: int, done: list[dict]) -> bool:
    """Whether ``items[start:]`` translates alone to what follows ``done`` (the translation
    of ``items[:start]``) in the translation of all of ``items``. litellm's translation
    carries three things from item to item: a function call joins the assistant message
    before it, an assistant reply may join the assistant turn before it, and a call's output
    looks for its call among the calls seen so far; our reasoning items look for their
    message on both sides. So: the remembered part ends with no assistant message, every
    output added follows its call in the added items, and no item is a reasoning item."""
    if not done or done[-1].get("role") == "assistant":
        return False
    calls: set[Any] = set()
    for item in items[start:]:
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "reasoning" or (
            kind == "function_call_output" and item.get("call_id") not in calls
        ):
            return False
        if kind == "function_call":
            calls.add(item.get("call_id"))
    return not any(isinstance(item, dict) and item.get("type") == "reasoning" for item in items)


def _anchor(item: dict) -> tuple[str, str] | None:
    """What identifies the assistant message an item becomes: a call's id, or a reply's text."""
    if item.get("type") == "function_call":
        return ("call", item["call_id"])
    if item.get("type", "message") == "message" and item.get("role") == "assistant":
        return ("text", _text_of(item.get("content")))
    return None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text") or "" for part in content or () if isinstance(part, dict))


def reasoning_anchors(items: list[dict]) -> list[tuple[tuple[str, str], dict]]:
    """Each reasoning item with the assistant item it belongs to: the next one before the
    user speaks again (a model reasons, then calls or answers), else the one before it."""
    anchors = []
    for index, item in enumerate(items):
        if item.get("type") != "reasoning":
            continue
        anchor = None
        for later in items[index + 1 :]:
            anchor = _anchor(later)
            if anchor is not None or later.get("type", "message") == "message":
                break
        for earlier in reversed(items[:index]) if anchor is None else ():
            anchor = _anchor(earlier)
            if anchor is not None:
                break
        if anchor is not None:
            anchors.append((anchor, item))
    return anchors


def attach_reasoning(
    messages: list[dict], anchors: list[tuple[tuple[str, str], dict]]
) -> list[dict]:
    """``messages`` with each anchored reasoning item in its assistant message's
    ``reasoning_items`` (an item whose message is not found is dropped: nothing to keep it
    with). An item goes to the first assistant message that makes its call or says its
    text, found in one index of them (Codex sends a reasoning item every turn: looking each
    up from the start grew with the square of the history)."""
    if not anchors:
        return messages
    first: dict[tuple[str, str], dict] = {}
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            first.setdefault(("call", call.get("id")), message)
        first.setdefault(("text", _text_of(message.get("content"))), message)
    for (kind, key), item in anchors:
        owner = first.get((kind, key)) if kind == "call" or key else None
        if owner is not None:
            owner.setdefault("reasoning_items", []).append(item)
    return messages


def _plain(message: Any) -> dict:
    message = dict(message)
    for call in message.get("tool_calls") or ():
        call.pop("index", None)
    # One output_text part is the assistant's text as chat completions returned it.
    content = message.get("content")
    if (
        message.get("role") == "assistant"
        and isinstance(content, list)
        and len(content) == 1
        and content[0].get("type") == "text"
    ):
        message["content"] = content[0]["text"]
    return message


def _after_compaction(
    data: dict[str, Any], owner_id: int
) -> tuple[dict[str, Any], list[dict], dict[str, Any]]:
    """A body whose input holds ``compaction`` items (ours, sent back) or ends with Codex's
    ``compaction_trigger``: the body with the input after the newest compaction item (the
    trigger taken off), the history that item stands for, and what the request carries for
    the conversation service. Everything before the newest item is ignored, as OpenAI does."""
    items = data.get("input")
    if not isinstance(items, list):
        return data, [], {}
    extra: dict[str, Any] = {}
    if items and isinstance(items[-1], dict) and items[-1].get("type") == "compaction_trigger":
        items = items[:-1]
        extra["compaction_trigger"] = True
    newest = max(
        (
            index
            for index, item in enumerate(items)
            if isinstance(item, dict) and item.get("type") == "compaction"
        ),
        default=None,
    )
    history: list[dict] = []
    if newest is not None:
        compaction = compacting.unseal(
            items[newest].get("encrypted_content"), owner_id, f"input[{newest}]"
        )
        history = compacting.history_of(compaction)
        items = items[newest + 1 :]
        extra.update(compaction=compaction, compaction_covers=len(history))
    if not extra:
        return data, [], {}
    return {**data, "input": items}, history, extra


def parse_for(owner_id: int | None) -> Any:
    def parse(body: bytes) -> ChatRequest:
        return parse_data(load_body(body), owner_id, len(body))

    return parse


def parse_data(data: dict[str, Any], owner_id: int | None, size: int = 0) -> ChatRequest:
    """A Responses body (already loaded) as the conversation service's request."""
    fields.check(data, fields.RESPONSES_FIELDS)
    previous = data.get("previous_response_id")
    history: list[dict] = []
    if previous is not None:
        if not isinstance(previous, str):
            raise invalid(
                "previous_response_id: must be a string.",
                code="invalid_type",
                param="previous_response_id",
            )
        history = _previous_history(previous, owner_id or 0)
    data, compacted, carried = _after_compaction(data, owner_id or 0)
    if carried.get("compaction") is not None:
        history, previous = compacted, None
    # What this conversation's previous request checked and translated (when its input
    # was items, in full, with store: false) is not done again.
    items = data.get("input")
    items = items if isinstance(items, list) else []  # (a string input has no key)
    key = conversation_key(data, "input") if previous is None and not carried else None
    start, done, _ = TRANSLATED.known(key, items)
    if start and not extendable(items, start, done):
        start, done = 0, []
    translated, messages = translate_body(data, history, start, done)
    chat = request_from(translated)
    TRANSLATED.remember(key, items, messages, size)
    store = data.get("store") is not False
    echoed = {
        "instructions": data.get("instructions"),
        "tools": data.get("tools") or [],
        "tool_choice": data.get("tool_choice") or "auto",
        "parallel_tool_calls": data.get("parallel_tool_calls", True),
        "temperature": data.get("temperature"),
        "top_p": data.get("top_p"),
        "metadata": data.get("metadata") or {},
        "previous_response_id": previous,
        "store": store,
    }
    response_id = f"resp_{random.getrandbits(128):032x}"
    return ChatRequest(
        model=chat.model,
        messages=chat.messages,
        stream=chat.stream,
        params=chat.params,
        known=chat.known,
        extra={"response_id": response_id, "store": store, "echo": echoed, **carried},
    )


def _usage(reply: Reply) -> dict[str, Any]:
    prompt = reply.usage.get("prompt_tokens", 0)
    completion = reply.usage.get("completion_tokens", 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.usage.get("total_tokens", prompt + completion),
    }


def _message_item(reply: Reply, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{reply.id[-24:]}",
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
        if status == "completed"
        else [],
    }


def _reasoning_item(reply: Reply, status: str = "completed") -> dict[str, Any]:
    """The upstream's reasoning as a Responses ``reasoning`` item (its text as
    ``reasoning_text`` content; there is no separate summary, nor encrypted content)."""
    text = reply.reasoning if status == "completed" else ""
    return {
        "type": "reasoning",
        "id": f"rs_{reply.id[-24:]}",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}] if text else [],
        "status": status,
    }


def _call_item(call: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call['id']}",
        "call_id": call["id"],
        "name": call["function"]["name"],
        "arguments": call["function"]["arguments"] if status == "completed" else "",
        "status": status,
    }


def _response(
    chat: ChatRequest, reply: Reply | None, output: list[dict], status: str
) -> dict[str, Any]:
    return {
        "id": chat.extra["response_id"],
        "object": "response",
        "created_at": reply.created if reply else int(time.time()),
        "status": status,
        "model": chat.model,
        "output": output,
        "usage": _usage(reply) if reply is not None and status == "completed" else None,
        "error": None,
        "incomplete_details": None,
        "text": {"format": {"type": "text"}},
        **chat.extra["echo"],
    }


def render(chat: ChatRequest, reply: Reply) -> dict[str, Any]:
    """The reply as a Responses body: a message item for its text, a function_call item
    for each tool call."""
    output = [chat.extra["compaction_item"]] if chat.extra.get("compaction_item") else []
    output += [_reasoning_item(reply)] if reply.reasoning else []
    if reply.content or not reply.tool_calls:
        output.append(_message_item(reply, reply.content))
    output += [_call_item(call) for call in reply.tool_calls]
    return _response(chat, reply, output, "completed")


class _Sequence:
    def __init__(self) -> None:
        self.number = 0

    def event(self, name: str, payload: dict[str, Any]) -> bytes:
        data = {"type": name, "sequence_number": self.number, **payload}
        self.number += 1
        return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def events(prepared: service.Prepared, chunks: Iterator[Any]) -> Iterator[bytes]:
    """The Responses SSE stream; the reply is stored before ``response.completed``."""
    chat = prepared.request
    gatherer = StreamGatherer(chat.model)
    reply = gatherer.reply
    seq = _Sequence()
    yield seq.event("response.created", {"response": _response(chat, None, [], "in_progress")})
    yield seq.event("response.in_progress", {"response": _response(chat, None, [], "in_progress")})
    text_index: int | None = None
    reasoning_index: int | None = None
    call_index: dict[int, int] = {}  # tool call number → output index
    output = 0
    items: list[tuple[int, dict[str, Any]]] = []
    compaction_item = chat.extra.get("compaction_item")
    if compaction_item:  # compacted before the model call (context_management): said first
        yield seq.event("response.output_item.added", {"output_index": 0, "item": compaction_item})
        yield seq.event("response.output_item.done", {"output_index": 0, "item": compaction_item})
        items.append((0, compaction_item))
        output = 1
    try:
        for upstream_chunk in chunks:
            thought = len(gatherer.reply.reasoning)
            chunk = gatherer.feed(upstream_chunk)
            thinking = gatherer.reply.reasoning[thought:]
            if thinking:
                if reasoning_index is None:
                    reasoning_index, output = output, output + 1
                    yield seq.event(
                        "response.output_item.added",
                        {
                            "output_index": reasoning_index,
                            "item": _reasoning_item(reply, "in_progress"),
                        },
                    )
                yield seq.event(
                    "response.reasoning_text.delta",
                    {
                        "item_id": f"rs_{reply.id[-24:]}",
                        "output_index": reasoning_index,
                        "content_index": 0,
                        "delta": thinking,
                    },
                )
            delta = chunk["choices"][0]["delta"] if chunk else {}
            if delta.get("content"):
                if text_index is None:
                    text_index, output = output, output + 1
                    item = _message_item(reply, "", "in_progress")
                    yield seq.event(
                        "response.output_item.added", {"output_index": text_index, "item": item}
                    )
                    part = {"type": "output_text", "text": "", "annotations": []}
                    yield seq.event(
                        "response.content_part.added",
                        {
                            "item_id": item["id"],
                            "output_index": text_index,
                            "content_index": 0,
                            "part": part,
                        },
                    )
                yield seq.event(
                    "response.output_text.delta",
                    {
                        "item_id": f"msg_{reply.id[-24:]}",
                        "output_index": text_index,
                        "content_index": 0,
                        "delta": delta["content"],
                        "logprobs": [],
                    },
                )
            for piece in delta.get("tool_calls") or ():
                number = piece["index"]
                slot = reply.tool_calls[number]
                if number not in call_index:
                    slot["id"] = slot["id"] or f"call_{reply.id[-12:]}_{number}"
                    call_index[number], output = output, output + 1
                    yield seq.event(
                        "response.output_item.added",
                        {
                            "output_index": call_index[number],
                            "item": _call_item(slot, "in_progress"),
                        },
                    )
                arguments = (piece.get("function") or {}).get("arguments")
                if arguments:
                    yield seq.event(
                        "response.function_call_arguments.delta",
                        {
                            "item_id": f"fc_{slot['id']}",
                            "output_index": call_index[number],
                            "delta": arguments,
                        },
                    )
        reply = service.store_streamed(prepared, gatherer)
    except ApiError as error:
        yield seq.event(
            "error",
            {
                "code": error.code,
                "message": error.message,
                "param": error.param,
                "error": error.payload()["error"],
            },
        )
        return
    except Exception:
        log.exception("responses stream for session %s failed", prepared.public_id)
        failure = ApiError(500, "The server failed while streaming.", type="server_error")
        yield seq.event(
            "error",
            {
                "code": None,
                "message": failure.message,
                "param": None,
                "error": failure.payload()["error"],
            },
        )
        return
    if reasoning_index is not None:
        item = _reasoning_item(reply)
        yield seq.event(
            "response.reasoning_text.done",
            {
                "item_id": item["id"],
                "output_index": reasoning_index,
                "content_index": 0,
                "text": reply.reasoning,
            },
        )
        items.append((reasoning_index, item))
    if text_index is not None:
        item = _message_item(reply, reply.content)
        yield seq.event(
            "response.output_text.done",
            {
                "item_id": item["id"],
                "output_index": text_index,
                "content_index": 0,
                "text": reply.content,
                "logprobs": [],
            },
        )
        yield seq.event(
            "response.content_part.done",
            {
                "item_id": item["id"],
                "output_index": text_index,
                "content_index": 0,
                "part": item["content"][0],
            },
        )
        items.append((text_index, item))
    for number, index in call_index.items():
        item = _call_item(reply.tool_calls[number])
        yield seq.event(
            "response.function_call_arguments.done",
            {"item_id": item["id"], "output_index": index, "arguments": item["arguments"]},
        )
        items.append((index, item))
    for index, item in sorted(items, key=lambda pair: pair[0]):
        if item is not compaction_item:  # (its done event went first)
            yield seq.event("response.output_item.done", {"output_index": index, "item": item})
    final = [item for _, item in sorted(items, key=lambda pair: pair[0])]
    yield seq.event("response.completed", {"response": _response(chat, reply, final, "completed")})


def _kept_user_items(chat: ChatRequest) -> list[dict[str, Any]]:
    # (from the translated messages: a previous_response_id's history has no input items)
    """The conversation's user messages as Responses input items (what a compaction's output
    keeps verbatim before its compaction item)."""
    kept = []
    for message in chat.messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        parts: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) else []
        if isinstance(content, list):
            parts = content
        converted = []
        for part in parts:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                converted.append({"type": "input_text", "text": part.get("text") or ""})
            elif part.get("type") == "image_url":
                url = (part.get("image_url") or {}).get("url")
                converted.append({"type": "input_image", "image_url": url, "detail": "auto"})
        kept.append({"type": "message", "role": "user", "content": converted})
    return kept


def _compaction_headers(request: HttpRequest, response: HttpResponseBase, run: Any) -> None:
    response[views.SESSION_HEADER] = (run.result_session or run.session).public_id
    response[views.COMPACTION_HEADER] = request.build_absolute_uri(
        reverse("compaction_detail", args=[run.public_id])
    )


def _triggered(request: HttpRequest, key: ApiKey, chat: ChatRequest) -> HttpResponseBase:
    """Codex's remote compaction v2: a ``/responses`` request ending in ``compaction_trigger``
    is answered with exactly one ``compaction`` output item (no model turn), streamed when
    asked."""
    run = compacting.compact_conversation(
        key,
        chat,
        asked=("openai", request.path, "compaction_trigger"),
        user_agent=request.headers.get("User-Agent", ""),
    )
    compaction_item = compacting.item(run, key.owner_id)
    body = {
        **_response(chat, None, [compaction_item], "completed"),
        "usage": compacting.usage(run),
    }
    response: HttpResponseBase
    if chat.stream:
        seq = _Sequence()
        pending = {**body, "status": "in_progress", "output": [], "usage": None}
        stream = [
            seq.event("response.created", {"response": pending}),
            seq.event("response.in_progress", {"response": pending}),
            seq.event("response.output_item.added", {"output_index": 0, "item": compaction_item}),
            seq.event("response.output_item.done", {"output_index": 0, "item": compaction_item}),
            seq.event("response.completed", {"response": body}),
        ]
        response = StreamingHttpResponse(iter(stream), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
    else:
        response = JsonResponse(body)
    _compaction_headers(request, response, run)
    return response


@csrf_exempt
def create(request: HttpRequest) -> HttpResponseBase:
    """``POST /v1/responses``."""
    # previous_response_id is looked up among the key owner's sessions, so the parser needs
    # the key: authenticate first (serve authenticates again, cheaply, for the others).
    key = None
    with contextlib.suppress(ApiError):  # serve answers the 401
        key = views.authenticate(request)
    owner_id = key.owner_id if key is not None else None
    parse = parse_for(owner_id)
    if key is not None and request.method == "POST":
        try:
            body = views.read_body(request)
            # A body that asks for compaction is parsed here (a cheap look first), once.
            if b'"compaction_trigger"' in body or b'"context_management"' in body:
                data = load_body(body)
                chat = parse_data(data, key.owner_id, len(body))
                if chat.extra.get("compaction_trigger"):
                    return _triggered(request, key, chat)
                chat = _compacted_first(request, key, chat, data.get("context_management"))
                parse = lambda _body: chat  # noqa: E731  (already parsed)
        except ApiError as error:
            return error.response("openai")
    return views.serve(request, views.Protocol("openai", parse, render, events))


def _compact_threshold(entries: Any) -> int | None:
    """The lowest ``compact_threshold`` of the request's compaction entries (checked by
    ``fields``), or None."""
    thresholds = [
        entry["compact_threshold"]
        for entry in entries or ()
        if entry.get("type") == "compaction" and entry.get("compact_threshold") is not None
    ]
    return min(thresholds) if thresholds else None


def _compacted_first(
    request: HttpRequest, key: ApiKey, chat: ChatRequest, entries: Any
) -> ChatRequest:
    """``context_management`` compaction: when the rendered input reaches the threshold, the
    conversation is stored and compacted before the model call, which then reads the
    compacted context; the reply's output opens with the compaction item. A conversation
    too short to compact is answered as it is."""
    threshold = _compact_threshold(entries)
    if threshold is None:
        return chat
    config = CompactionConfig(model=resolve_model(chat.model))
    if sum(count_messages_tokens(compacting.rendered(chat), config)) < threshold:
        return chat
    try:
        run = compacting.compact_conversation(
            key,
            chat,
            asked=("openai", request.path, f"context_management compact_threshold {threshold:,}"),
            user_agent=request.headers.get("User-Agent", ""),
        )
    except ApiError as error:
        if error.code != "compaction_nothing_to_summarize":
            raise
        return chat
    extra = {
        **chat.extra,
        "compaction": None,
        "compaction_item": compacting.item(run, key.owner_id),
    }
    return dataclasses.replace(chat, extra=extra)


COMPACT_FIELDS = ("model", "input", "previous_response_id")


@csrf_exempt
def compact(request: HttpRequest) -> HttpResponseBase:
    """``POST /v1/responses/compact``: the conversation (``input`` and/or
    ``previous_response_id``) compacted by our engine and stored; the reply keeps the user
    messages and ends with one ``compaction`` item standing for the rest."""
    if request.method != "POST":
        return views.method_not_allowed("POST")
    try:
        key = views.authenticate(request)
        data = load_body(views.read_body(request))
        instructions = data.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise invalid(
                "instructions: must be a string.", code="invalid_type", param="instructions"
            )
        # The instructions say how to compact (our summary's focus), not a system prompt.
        body = {name: data[name] for name in COMPACT_FIELDS if name in data}
        if body.get("input") is None and body.get("previous_response_id") is not None:
            body["input"] = []
        chat = parse_data(body, key.owner_id)
        run = compacting.compact_conversation(
            key,
            chat,
            asked=("openai", request.path, "responses.compact"),
            instructions=instructions or "",
            user_agent=request.headers.get("User-Agent", ""),
        )
    except ApiError as error:
        return error.response("openai")
    payload = {
        "id": f"resp_{random.getrandbits(128):032x}",
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": [*_kept_user_items(chat), compacting.item(run, key.owner_id)],
        "usage": compacting.usage(run),
    }
    response = JsonResponse(payload)
    _compaction_headers(request, response, run)
    return response
