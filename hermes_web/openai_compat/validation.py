"""The request body of ``POST /v1/chat/completions``: parsed, checked, nothing stored yet."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from compaction import validate_tool_pairs
from hermes_web import validation
from hermes_web.openai_compat import fields
from hermes_web.openai_compat.errors import ApiError, invalid
from hermes_web.openai_compat.matching import RECENT, Known

ROLES = ("system", "developer", "user", "assistant", "tool")
# The content part types of a chat-completions message: any other type (``video``…) is
# refused here, as the provider call would otherwise fail inside litellm.
PART_TYPES = ("text", "image_url", "input_audio", "file", "refusal")
# Sampling and tool parameters passed on to the model as the client sent them.
PASSED_ON = (
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "parallel_tool_calls",
    "presence_penalty",
    "reasoning_effort",
    "response_format",
    "seed",
    "stop",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
)


@dataclass(frozen=True)
class ChatRequest:
    """A checked chat-completions request."""

    model: str
    messages: list[dict]
    stream: bool = False
    include_usage: bool = False
    params: dict[str, Any] = field(default_factory=dict)
    # What a protocol adapter keeps for its reply (the Responses API's echoed fields…).
    extra: dict[str, Any] = field(default_factory=dict)
    # What this process already knew of the messages (RecentHistories.lookup).
    known: Known | None = None


def parse_request(body: bytes) -> ChatRequest:
    """The request, or ApiError (400) naming the first thing wrong with it.

    Messages must be OpenAI chat messages with a known role; tool results must follow the
    assistant message that called them and every call must have its result (what providers
    require too): a broken pair is refused here rather than stored. Every other field
    sent on to the model is checked too (``fields.CHAT_FIELDS``).
    """
    data = load_body(body)
    fields.check(data, fields.CHAT_FIELDS)
    return request_from(data)


def load_body(body: bytes) -> dict[str, Any]:
    """The JSON object of a request body; ApiError 400 for anything else, including JSON
    nested deeper than the parser's recursion limit (``[`` × 100,000)."""
    try:
        data = json.loads(body or b"")
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise invalid(
            f"We could not parse the JSON body of your request ({reason}).", code="invalid_json"
        ) from None
    if not isinstance(data, dict):
        raise invalid("The request body must be a JSON object.", code="invalid_json")
    return data


def request_from(data: dict[str, Any]) -> ChatRequest:
    """The checked request of a chat-completions body (also what the Messages and Responses
    adapters translate their bodies to)."""
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise invalid(
            "Missing required parameter: 'model'.", code="missing_required_parameter", param="model"
        )
    messages = data.get("messages")
    if messages is None:
        raise invalid(
            "Missing required parameter: 'messages'.",
            code="missing_required_parameter",
            param="messages",
        )
    if not isinstance(messages, list) or not messages:
        raise invalid(
            "'messages' must be a non-empty array of messages.",
            code="invalid_type",
            param="messages",
        )
    # What this process checked in the same conversation's previous request is not checked
    # again: only the messages the client added are (see RecentHistories).
    known = RECENT.lookup(messages)
    for index in range(known.count, len(messages)):
        check_message(index, messages[index])
    # The remembered history, whole, had every call answered: the pairing of what follows
    # it is checked alone (the whole list again only to name a problem's place).
    problems = validate_tool_pairs(messages[known.count :] if known.whole else messages)
    if problems and known.whole:
        problems = validate_tool_pairs(messages)
    if problems:
        raise invalid(
            "Broken tool calls in 'messages': "
            + "; ".join(problems[:3])
            + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
            + ". Every assistant tool call needs a tool message with its tool_call_id right after it.",
            code="invalid_tool_pairs",
            param="messages",
        )
    RECENT.remember(messages, known=known)
    if data.get("n") not in (None, 1):
        raise invalid("Only n=1 is supported.", code="unsupported_parameter", param="n")
    options = data.get("stream_options") or {}
    if not isinstance(options, dict):
        raise invalid("'stream_options' must be an object.", code="invalid_type")
    params = {key: data[key] for key in PASSED_ON if data.get(key) is not None}
    return ChatRequest(
        model=model.strip(),
        messages=messages,
        stream=bool(data.get("stream")),
        include_usage=bool(options.get("include_usage")),
        params=params,
        known=known,
    )


def check_message(index: int, message: Any) -> None:
    """ApiError (400) when message ``index`` is not a chat message we can store and send."""
    _check_shape(index, message)
    where = f"messages[{index}]"
    # Then the rules every entrance shares (text, content parts, tool calls in depth).
    try:
        validation.check_content(message.get("content"), "content")
        validation.check_tool_calls(message.get("tool_calls"), "tool_calls")
        for name in ("tool_call_id", "name"):
            validation.check_text(message.get(name), name)
    except validation.Invalid as error:
        raise invalid(f"{where}.{error}", code="invalid_value", param=where) from None
    content = message.get("content")
    for number, part in enumerate(content if isinstance(content, list) else ()):
        if part["type"] not in PART_TYPES:
            raise invalid(
                f"{where}.content[{number}].type {part['type']!r} is not a content part type "
                f"this endpoint sends on (one of {', '.join(PART_TYPES)}).",
                code="invalid_value",
                param=f"{where}.content[{number}].type",
            )


def _check_shape(index: int, message: Any) -> None:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise invalid(f"{where} must be an object.", code="invalid_type", param=where)
    role = message.get("role")
    if role not in ROLES:
        raise invalid(
            f"{where}.role must be one of {', '.join(ROLES)}; got {role!r}.",
            code="invalid_value",
            param=f"{where}.role",
        )
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise invalid(
            f"{where}.content must be a string, an array of content parts or null.",
            code="invalid_type",
            param=f"{where}.content",
        )
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise invalid(
            f"{where} is a tool message without a tool_call_id.",
            code="missing_required_parameter",
            param=f"{where}.tool_call_id",
        )
    calls = message.get("tool_calls")
    if calls is None:
        if content is None and role != "assistant":
            raise invalid(
                f"{where}.content is required for a {role} message.",
                code="missing_required_parameter",
                param=f"{where}.content",
            )
        return
    if role != "assistant" or not isinstance(calls, list):
        raise invalid(
            f"{where}.tool_calls must be an array on an assistant message.",
            code="invalid_type",
            param=f"{where}.tool_calls",
        )
    for number, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(function, dict)
            or not isinstance(call.get("id"), str)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments", ""), str)
        ):
            raise invalid(
                f"{where}.tool_calls[{number}] needs an id and a function with a name and "
                "string arguments.",
                code="invalid_value",
                param=f"{where}.tool_calls[{number}]",
            )


__all__ = ["ApiError", "ChatRequest", "load_body", "parse_request", "request_from"]
