"""``POST /v1/messages`` (Anthropic Messages) and ``/v1/messages/count_tokens``: a thin
adapter onto the same conversation service as chat completions.

The request is checked here (roles, block types, where a problem is), then translated to
chat-completions messages by litellm's own Anthropic adapter
(``LiteLLMAnthropicMessagesAdapter``, the one its proxy uses), with mid-conversation system
messages kept as system messages and ``cache_control`` removed (a transport hint, not
content). The reply, whole or streamed, is written back in Anthropic's shape here: our
reply is the service's gathered ``Reply``, not a litellm response object, and it must be
stored before ``message_stop``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import random
from collections.abc import Iterator
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from compaction import CompactionConfig, count_message_tokens
from hermes_web import validation
from hermes_web.openai_compat import anthropic_native, fields, service, views
from hermes_web.openai_compat.anthropic_sse import event
from hermes_web.openai_compat.errors import ApiError, invalid, scrub
from hermes_web.openai_compat.translations import MESSAGES as TRANSLATED
from hermes_web.openai_compat.translations import conversation_key
from hermes_web.openai_compat.upstream import (
    Reply,
    StreamGatherer,
    _import_litellm,
    resolve_model,
)
from hermes_web.openai_compat.validation import ChatRequest, load_body, request_from

log = logging.getLogger(__name__)

ROLES = ("user", "assistant", "system")
BLOCK_TYPES = (
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
)
RESULT_BLOCK_TYPES = ("text", "image", "document")
# An assistant turn's server tool blocks (web search, code execution, MCP…), as a model that
# was offered server tools (anthropic_native) wrote them; the translation leaves them out.
# (Their results' types are named after the tool: web_search_tool_result…)
SERVER_TOOL_USES = ("server_tool_use", "mcp_tool_use")
# Providers whose models take Anthropic thinking blocks back; others get the turn without them
# (an OpenAI-compatible server may refuse the unknown fields).
THINKING_PROVIDERS = ("anthropic/", "bedrock/", "vertex_ai/")
THINKING_FIELDS = frozenset(("thinking_blocks", "reasoning_content"))
# How many of a request's newest messages are translated one at a time (see translate_body).
ONE_BY_ONE = 4
STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


@functools.cache
def _adapter() -> Any:
    _import_litellm()  # the app's litellm set-up first
    from litellm.llms.anthropic.messages.adapters.transformation import (
        LiteLLMAnthropicMessagesAdapter,
    )

    # keep_tool_errors: a tool_result's is_error stays on the tool message (stored, and
    # passed on to an Anthropic upstream).
    return LiteLLMAnthropicMessagesAdapter(keep_tool_errors=True)


def _check_blocks(content: Any, where: str, allowed: tuple[str, ...]) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise invalid(
            f"{where} must be a string or an array of content blocks.",
            code="invalid_type",
            param=where,
        )
    for number, block in enumerate(content):
        here = f"{where}[{number}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in allowed and not (allowed is BLOCK_TYPES and _server_block(kind)):
            named = (
                allowed + SERVER_TOOL_USES + ("*_tool_result",)
                if allowed is BLOCK_TYPES
                else allowed
            )
            raise invalid(
                f"{here}.type must be one of {', '.join(named)}; got {kind!r}.",
                code="invalid_value",
                param=f"{here}.type",
            )
        if kind == "text" and not isinstance(block.get("text"), str):
            raise invalid(f"{here}.text must be a string.", code="invalid_type", param=here)
        if kind == "tool_use" and not (
            isinstance(block.get("id"), str)
            and isinstance(block.get("name"), str)
            and isinstance(block.get("input", {}), dict)
        ):
            raise invalid(
                f"{here} needs a string id and name and an object input.",
                code="invalid_value",
                param=here,
            )
        if kind == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                raise invalid(
                    f"{here}.tool_use_id must be a string.", code="invalid_value", param=here
                )
            if block.get("content") is not None:
                _check_blocks(block["content"], f"{here}.content", RESULT_BLOCK_TYPES)
        if kind == "image" and not isinstance(block.get("source"), dict):
            raise invalid(f"{here}.source must be an object.", code="invalid_value", param=here)


def _server_block(kind: object) -> bool:
    return isinstance(kind, str) and (
        kind in SERVER_TOOL_USES or (kind.endswith("_tool_result") and kind != "tool_result")
    )


def check_body(data: dict[str, Any], start: int = 0) -> None:
    """ApiError 400 naming the first thing in a Messages body we cannot translate (the
    messages from ``start`` on: those before it were checked with the same body before)."""
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise invalid("model: Field required", code="missing_required_parameter", param="model")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages: must be a non-empty array.", code="invalid_type", param="messages")
    fields.check(data, fields.MESSAGES_FIELDS)
    system = data.get("system")
    if system is not None:
        _check_blocks(system, "system", ("text",))
    for index in range(start, len(messages)):
        message = messages[index]
        where = f"messages.{index}"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise invalid(
                f"{where}.role must be one of {', '.join(ROLES)}.",
                code="invalid_value",
                param=f"{where}.role",
            )
        _check_blocks(message.get("content"), f"{where}.content", BLOCK_TYPES)
    try:
        validation.check_text(system, "body.system", 1)
        for index in range(start, len(messages)):
            validation.check_text(messages[index], f"body.messages[{index}]", 2)
    except validation.Invalid as error:
        raise invalid(str(error), code="invalid_value") from None


def without_cache_control(value: Any) -> Any:
    """``value`` with every ``cache_control`` key removed (prompt-caching hints only)."""
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(item) for item in value]
    return value


def to_chat(data: dict[str, Any]) -> dict[str, Any]:
    """A checked Messages body as a chat-completions body (litellm's translation)."""
    return translate_body(data)[0]


def translate_body(
    data: dict[str, Any],
    start: int = 0,
    done: list[dict] | None = None,
    ends: list[int] | None = None,
) -> tuple[dict[str, Any], list[dict], list[int]]:
    """``to_chat``, the translation of the messages without the system prompt, and where
    each message's translation ends in it (-1 inside a piece translated at once).
    ``done``: the translation of the first ``start`` messages, from the same conversation's
    previous request, ``ends`` theirs (messages are translated one by one: the rest is
    translated alone and appended). The last ``ONE_BY_ONE`` messages are translated one at a
    time, so that the next request may start over from any of them (Claude Code moves its
    ``cache_control`` mark to the newest message every request)."""
    # Function tools only: Anthropic's server tools (web search, code execution…) have a
    # versioned type and no input_schema; a chat-completions model cannot run them.
    tools = [
        tool
        for tool in data.get("tools") or ()
        if isinstance(tool.get("name"), str) and "input_schema" in tool
    ]
    body = {
        key: value
        for key, value in data.items()
        if key in ("model", "system", "tool_choice", "max_tokens", "metadata")
        or key in ("stop_sequences", "temperature", "top_p", "top_k")
    }
    if tools:
        body["tools"] = tools
    else:
        body.pop("tool_choice", None)
    body.setdefault("max_tokens", 4096)
    # Everything but the messages, with the system prompt as its first message; then the
    # messages, without it.
    chat = _translate({**body, "messages": []})
    without_system = {key: value for key, value in body.items() if key != "system"}
    messages, ends = list(done or []), list(ends or [0])
    added = data["messages"][start:]
    at_once, one_by_one = added[:-ONE_BY_ONE], added[-ONE_BY_ONE:]
    if at_once:
        messages += _translate({**without_system, "messages": at_once})["messages"]
        ends += [-1] * (len(at_once) - 1) + [len(messages)]
    for message in one_by_one:
        messages += _translate({**without_system, "messages": [message]})["messages"]
        ends.append(len(messages))
    chat["messages"] = chat["messages"] + messages
    chat["stream"] = bool(data.get("stream"))
    return chat, messages, ends


def _translate(body: dict[str, Any]) -> dict[str, Any]:
    try:
        translated, _ = _adapter().translate_anthropic_to_openai(
            body, custom_llm_provider="openai", preserve_midturn_system=True
        )
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise invalid(
            f"This Messages request could not be translated ({scrub(str(error))}).",
            code="invalid_value",
        ) from None
    chat = without_cache_control(dict(translated))
    for message in chat.get("messages") or ():
        for name in ("thinking_blocks", "reasoning_content"):
            if message.get(name) is None:
                message.pop(name, None)
    return chat


def parse(body: bytes) -> ChatRequest:
    """The Messages request as the service's chat request (ApiError 400 when it is not one)."""
    return parse_data(load_body(body), len(body))


def parse_data(
    data: dict[str, Any],
    size: int = 0,
    history: list[dict] | None = None,
    carried: dict[str, Any] | None = None,
) -> ChatRequest:
    """``parse`` of a loaded body. ``history``: what a compaction block sent back stands for
    (its messages, system prompt included, come before the body's messages)."""
    # What this conversation's previous request checked and translated is not done again.
    key = conversation_key(data, "messages") if history is None else None
    start, done, ends = TRANSLATED.known(key, data.get("messages") or [])
    check_body(data, start)
    translated, kept, ends = translate_body(data, start, done, ends)
    if history is not None:
        translated = {**translated, "messages": history + kept}
    chat = request_from(translated)
    TRANSLATED.remember(key, data["messages"], kept, size, ends)
    params, messages = chat.params, chat.messages
    if resolve_model(chat.model).startswith(THINKING_PROVIDERS):
        # Claude behind litellm takes the thinking blocks back (signed) and the setting.
        if isinstance(data.get("thinking"), dict):
            params = {**params, "thinking": data["thinking"]}
    else:  # copies without them: the translated messages are kept for the next request
        messages = [
            {k: v for k, v in m.items() if k not in THINKING_FIELDS}
            if not THINKING_FIELDS.isdisjoint(m)
            else m
            for m in messages
        ]
    return ChatRequest(
        model=chat.model,
        messages=messages,
        stream=chat.stream,
        params=params,
        known=chat.known,
        extra={"id": f"msg_{random.getrandbits(96):024x}", **(carried or {})},
    )


def tool_input(arguments: str) -> dict[str, Any]:
    """A tool call's arguments as the object Anthropic's ``input`` is ({} when not one)."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def usage(reply: Reply, chat: ChatRequest | None = None) -> dict[str, Any]:
    """Anthropic's usage; after a compaction this request ran first, its cost and the
    message's each in ``iterations`` (the top-level numbers are the message's)."""
    counted: dict[str, Any] = {
        "input_tokens": reply.usage.get("prompt_tokens", 0),
        "output_tokens": reply.usage.get("completion_tokens", 0),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    spent = chat.extra.get("compaction_iteration") if chat is not None else None
    if spent:
        counted["iterations"] = [spent, {"type": "message", **counted}]
    return counted


def stop_reason(reply: Reply) -> str:
    if reply.tool_calls:
        return "tool_use"
    return STOP_REASONS.get(reply.finish_reason or "stop", "end_turn")


def render(chat: ChatRequest, reply: Reply) -> dict[str, Any]:
    """The reply as a Messages response body."""
    content: list[dict[str, Any]] = []
    if chat.extra.get("compaction_block"):
        content.append(chat.extra["compaction_block"])
    if reply.reasoning:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": ""})
    if reply.content:
        content.append({"type": "text", "text": reply.content})
    for call in reply.tool_calls:
        function = call["function"]
        content.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": function["name"],
                "input": tool_input(function["arguments"]),
            }
        )
    managed = _context_management(chat)
    return {
        **managed,
        "id": chat.extra.get("id") or f"msg_{reply.id[-24:]}",
        "type": "message",
        "role": "assistant",
        "model": chat.model,
        "content": content,
        "stop_reason": stop_reason(reply),
        "stop_sequence": None,
        "usage": usage(reply, chat),
    }


def _context_management(chat: ChatRequest) -> dict[str, Any]:
    """``context_management.applied_edits`` when the request asked for edits."""
    applied = chat.extra.get("applied_edits")
    return {} if applied is None else {"context_management": {"applied_edits": applied}}


class _Blocks:
    """Anthropic's content blocks, opened and closed as the chat chunks arrive."""

    def __init__(self) -> None:
        self.index = -1
        self.open: tuple[str, int] | None = None  # (kind, tool call index)

    def start(self, kind: str, block: dict[str, Any], call: int = -1) -> Iterator[bytes]:
        yield from self.stop()
        self.index += 1
        self.open = (kind, call)
        yield event("content_block_start", {"index": self.index, "content_block": block})

    def stop(self) -> Iterator[bytes]:
        if self.open is not None:
            self.open = None
            yield event("content_block_stop", {"index": self.index})

    def delta(self, delta: dict[str, Any]) -> bytes:
        return event("content_block_delta", {"index": self.index, "delta": delta})


def events(prepared: service.Prepared, chunks: Iterator[Any]) -> Iterator[bytes]:
    """The Messages SSE stream. As for chat completions, the reply is stored before
    ``message_stop``; a stream that breaks stores nothing and ends with an ``error`` event."""
    chat = prepared.request
    gatherer = StreamGatherer(chat.model)
    blocks = _Blocks()
    message: dict[str, Any] = {
        "id": chat.extra.get("id") or "msg_stream",
        "type": "message",
        "role": "assistant",
        "model": chat.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    yield event("message_start", {"message": message})
    yield event("ping", {})
    compacted = chat.extra.get("compaction_block")
    if compacted:  # compacted before the model call (compact_20260112): the first block
        yield from blocks.start("compaction", {**compacted, "content": None})
        yield blocks.delta({"type": "compaction_delta", "content": compacted["content"]})
        yield from blocks.stop()
    try:
        for upstream_chunk in chunks:
            thought = len(gatherer.reply.reasoning)
            chunk = gatherer.feed(upstream_chunk)
            thinking = gatherer.reply.reasoning[thought:]
            if thinking:
                if blocks.open is None or blocks.open[0] != "thinking":
                    yield from blocks.start("thinking", {"type": "thinking", "thinking": ""})
                yield blocks.delta({"type": "thinking_delta", "thinking": thinking})
            delta = chunk["choices"][0]["delta"] if chunk else {}
            if delta.get("content"):
                if blocks.open is None or blocks.open[0] != "text":
                    yield from blocks.start("text", {"type": "text", "text": ""})
                yield blocks.delta({"type": "text_delta", "text": delta["content"]})
            for piece in delta.get("tool_calls") or ():
                number = piece["index"]
                slot = gatherer.reply.tool_calls[number]
                if blocks.open != ("tool_use", number):
                    # A call's id is sent in its first piece; one without gets ours now.
                    slot["id"] = slot["id"] or f"toolu_{gatherer.reply.id[-12:]}_{number}"
                    block = {
                        "type": "tool_use",
                        "id": slot["id"],
                        "name": slot["function"]["name"],
                        "input": {},
                    }
                    yield from blocks.start("tool_use", block, number)
                arguments = (piece.get("function") or {}).get("arguments")
                if arguments:
                    yield blocks.delta({"type": "input_json_delta", "partial_json": arguments})
        reply = service.store_streamed(prepared, gatherer)
    except ApiError as error:
        yield event("error", {"error": error.anthropic_payload()["error"]})
        return
    except Exception:
        log.exception("messages stream for session %s failed", prepared.public_id)
        failure = ApiError(500, "The server failed while streaming.", type="api_error")
        yield event("error", {"error": failure.anthropic_payload()["error"]})
        return
    yield from blocks.stop()
    yield event(
        "message_delta",
        {
            "delta": {"stop_reason": stop_reason(reply), "stop_sequence": None},
            "usage": usage(reply, chat),
            **_context_management(chat),
        },
    )
    yield event("message_stop", {})


MESSAGES = views.Protocol("anthropic", parse, render, events)


def parse_native(body: bytes) -> ChatRequest:
    """``parse``, keeping the client's body for a native call (``anthropic_native``)."""
    data = load_body(body)
    return anthropic_native.keeping_body(data, parse_data(data, len(body)))


# What the service does not compact may go to an Anthropic model in its own protocol.
MESSAGES_NATIVE = dataclasses.replace(
    MESSAGES,
    parse=parse_native,
    native=anthropic_native.call,
    native_stream=anthropic_native.stream,
)


@csrf_exempt
def messages(request: HttpRequest) -> HttpResponseBase:
    """``POST /v1/messages`` (``?beta=true`` and ``anthropic-beta`` headers are tolerated:
    the features they switch on either translate or are dropped, or reach an Anthropic model
    as sent: ``anthropic_native``). A request with
    ``compaction`` (on-demand compaction) or a ``compaction`` block sent back is read here
    (``anthropic_compaction``)."""
    # Imported here: those modules build on this one's parser.
    from hermes_web.openai_compat import anthropic_compaction

    key = None
    with contextlib.suppress(ApiError):  # serve answers the 401
        key = views.authenticate(request)
    if key is None or request.method != "POST":
        return views.serve(request, MESSAGES)
    try:
        body = views.read_body(request)
        # A cheap look first: most requests ask for no compaction. Those may reach an
        # Anthropic model in its own protocol (anthropic_native decides).
        if b'"compaction' not in body and b'"context_management"' not in body:
            return views.serve(request, MESSAGES_NATIVE)
        data = load_body(body)
        anywhere = anthropic_compaction.threshold_blocks(request, data)
        data, history, carried = anthropic_compaction.after_block(
            data, key.owner_id, anywhere=anywhere
        )
        if data.get("compaction") is not None:
            return anthropic_compaction.on_demand(request, key, data, history, carried, parse_data)
        chat = parse_data(data, len(body), history, carried)
        chat = anthropic_compaction.threshold_first(request, key, chat, data)
        chat = anthropic_compaction.with_clearing(chat, data)
        if chat.extra.get("paused"):
            return anthropic_compaction.paused(request, chat)
        if history is None:
            # No compaction block sent back: the client's own body may still reach an
            # Anthropic model (when no edit or compaction changed what the model reads).
            chat = anthropic_native.keeping_body(data, chat)
    except ApiError as error:
        return error.response("anthropic")
    return views.serve(request, dataclasses.replace(MESSAGES_NATIVE, parse=lambda _body: chat))


@csrf_exempt
def count_tokens(request: HttpRequest) -> HttpResponseBase:
    """``POST /v1/messages/count_tokens``: the prompt's tokens by the served model's
    tokenizer (what the compaction counts with), ``{"input_tokens": n}``."""
    # Imported here: those modules build on this one's parser.
    if request.method != "POST":
        return views.method_not_allowed("POST", "anthropic")
    from hermes_web.openai_compat import anthropic_compaction, compacting

    try:
        key = views.authenticate(request)
        data = load_body(views.read_body(request))
        # A compaction block sent back counts as the context it stands for (our head +
        # summary + tail); a ``compaction`` parameter is ignored: counting never compacts.
        data, history, carried = anthropic_compaction.after_block(data, key.owner_id)
        if history is not None:
            context = compacting.context_of(carried["compaction"])
            chat = parse_data(data, history=context)
        else:
            check_body(data)
            chat = request_from(to_chat(data))
        config = CompactionConfig(model=resolve_model(chat.model))
        total = sum(count_message_tokens(message, config) for message in chat.messages)
        if chat.params.get("tools"):
            total += count_message_tokens(
                {"role": "system", "content": json.dumps(chat.params["tools"])}, config
            )
    except ApiError as error:
        return error.response("anthropic")
    return JsonResponse({"input_tokens": total})
