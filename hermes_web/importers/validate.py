"""Every parsed message checked before storing: roles, content parts, tool calls, ids, text.

What passes here is what the chat, conversation and inspector pages and the engine can
always handle: content is text, None or a list of typed parts; tool calls are objects with
a string id, a function name and string arguments; every string is encodable Unicode (a
lone surrogate such as ``\\ud800`` is not). A problem names the message and what is wrong.
"""

from __future__ import annotations

from typing import Any

from hermes_web.importers.base import ROLES, ImportProblem, ParsedMessage, ParsedSession

MAX_DEPTH = 64


class Invalid(ValueError):
    """What is wrong with one message (the caller adds file, line and message number)."""


def _text_ok(value: str, where: str) -> None:
    if "\x00" in value:  # PostgreSQL cannot store it; refused on every database alike
        raise Invalid(f"{where} holds a NUL character (\\u0000)")
    if value.isascii():  # the common case, checked without copying the text
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = error.object[error.start : error.end]
        raise Invalid(f"{where} holds text that is not valid Unicode ({bad!r})") from None


def _walk(value: Any, where: str, depth: int = 0) -> None:
    """Strings anywhere inside ``value`` are valid Unicode; nesting is bounded."""
    if depth > MAX_DEPTH:
        raise Invalid(f"{where} is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        _text_ok(value, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            _text_ok(str(key), where)
            _walk(item, where, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _walk(item, where, depth + 1)
    elif isinstance(value, float) and value != value:  # NaN: not JSON, breaks PostgreSQL
        raise Invalid(f"{where} holds NaN")


def check_content(content: Any, where: str = "content") -> None:
    if content is None:
        return
    if isinstance(content, str):
        _text_ok(content, where)
        return
    if not isinstance(content, list):
        raise Invalid(f"{where} is of type {type(content).__name__}, not text or a list of parts")
    for number, part in enumerate(content, 1):
        here = f"{where} part {number}"
        if not isinstance(part, dict):
            raise Invalid(f"{here} is of type {type(part).__name__}, not an object")
        kind = part.get("type")
        if not isinstance(kind, str) or not kind:
            raise Invalid(f"{here} has no string 'type'")
        if kind in ("text", "input_text", "output_text") and not isinstance(part.get("text"), str):
            raise Invalid(f"{here}: 'text' is {type(part.get('text')).__name__}, not text")
        if kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                raise Invalid(f"{here}: image_url has no string url")
        _walk(part, here)


def check_tool_calls(calls: Any, where: str = "tool_calls") -> None:
    if calls is None:
        return
    if not isinstance(calls, list):
        raise Invalid(f"{where} is of type {type(calls).__name__}, not a list")
    for number, call in enumerate(calls, 1):
        here = f"{where}[{number}]"
        if not isinstance(call, dict):
            raise Invalid(f"{here} is of type {type(call).__name__}, not an object")
        if not isinstance(call.get("id"), str) or not call["id"]:
            raise Invalid(f"{here} has no string id")
        function = call.get("function")
        if not isinstance(function, dict):
            raise Invalid(f"{here} has no 'function' object")
        if not isinstance(function.get("name"), str):
            raise Invalid(f"{here}: function name is not text")
        if not isinstance(function.get("arguments"), str):
            raise Invalid(f"{here}: function arguments are not a JSON string")
        _walk(call, here)


def check_message(message: ParsedMessage) -> None:
    if message.role not in ROLES:
        raise Invalid(f"unknown role {message.role!r}")
    check_content(message.content)
    check_tool_calls(message.tool_calls)
    if message.tool_calls and message.role != "assistant":
        raise Invalid(f"a {message.role} message carries tool_calls")
    for name in ("tool_call_id", "tool_name"):
        value = getattr(message, name)
        if not isinstance(value, str):
            raise Invalid(f"{name} is not text")
        _text_ok(value, name)
    _walk(message.reasoning, "reasoning")
    _walk(message.extra, "metadata")


def check_parsed(parsed: ParsedSession, file: str) -> None:
    """Raise an ImportProblem naming the first invalid message of the session."""
    for number, message in enumerate(parsed.messages, 1):
        try:
            check_message(message)
        except Invalid as error:
            line = message.extra.get("line") if isinstance(message.extra, dict) else None
            raise ImportProblem(
                file,
                line if isinstance(line, int) else parsed.line,
                f"message {number}: {error}",
                parsed.public_id,
            ) from None
    try:
        _walk(parsed.title, "title")
        _walk(parsed.public_id, "session id")
        _walk(parsed.extra, "session metadata")
    except Invalid as error:
        raise ImportProblem(file, parsed.line, str(error), "") from None
