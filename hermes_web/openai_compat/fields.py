"""The fields each ``/v1`` protocol forwards to the model besides the messages: tools, tool
choice, sampling numbers, stop sequences, response format. Each is checked here, before
anything is stored or sent, so that a wrong type becomes a 400 naming its place
(``tools[0].function.parameters: must be an object``) instead of a crash inside litellm or
the provider's SDK (a string ``parameters`` once came back as a 502 with litellm's traceback).

One table per protocol says which field holds what; the checks are shared. Paths follow the
protocol's own spelling: ``tools[0].function.parameters`` for OpenAI's, ``tools.0.input_schema``
for Anthropic's (as their APIs name fields in their own errors).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NoReturn

from hermes_web import validation
from hermes_web.openai_compat.errors import invalid

# The largest token count or seed a request may name: past it a provider answers with an
# error of its own at best (an int64 overflow in some SDKs at worst).
MAX_TOKENS = 2**31 - 1
MAX_SEED = 2**63 - 1
MAX_TOOLS = 512
MAX_STOPS = 16


def _fail(where: str, what: str, code: str = "invalid_type") -> NoReturn:
    raise invalid(f"{where}: {what}", code=code, param=where)


def _number(lo: float, hi: float, *, integer: bool = False) -> Callable[[Any, str], None]:
    def check(value: Any, where: str) -> None:
        kind = "an integer" if integer else "a number"
        if isinstance(value, bool) or not isinstance(value, int | float):
            _fail(where, f"must be {kind}")
        if integer and not isinstance(value, int):
            _fail(where, f"must be {kind}")
        # NaN and infinities are JSON to Python's parser but not to a provider's.
        if not (math.isfinite(value) and lo <= value <= hi):
            _fail(where, f"must be {kind} from {lo:g} to {hi:g}", "invalid_value")

    return check


def _boolean(value: Any, where: str) -> None:
    if not isinstance(value, bool):
        _fail(where, "must be true or false")


def _string(value: Any, where: str) -> None:
    if not isinstance(value, str):
        _fail(where, "must be a string")


def _name(value: Any, where: str) -> None:
    if not isinstance(value, str) or not value.strip():
        _fail(where, "must be a non-empty string")


def _object(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        _fail(where, "must be an object")
    return value


def _stop(value: Any, where: str) -> None:
    if isinstance(value, str):
        return
    if not isinstance(value, list) or len(value) > MAX_STOPS:
        _fail(where, f"must be a string or an array of at most {MAX_STOPS} strings")
    for index, item in enumerate(value):
        _string(item, f"{where}[{index}]")


def _string_list(value: Any, where: str, dotted: bool = False) -> None:
    if not isinstance(value, list) or len(value) > MAX_STOPS:
        _fail(where, f"must be an array of at most {MAX_STOPS} strings")
    for index, item in enumerate(value):
        _string(item, f"{where}.{index}" if dotted else f"{where}[{index}]")


def _logit_bias(value: Any, where: str) -> None:
    _object(value, where)
    for key, bias in value.items():
        _number(-100, 100)(bias, f"{where}.{key}")


def _response_format(value: Any, where: str) -> None:
    _object(value, where)
    kind = value.get("type")
    if kind not in ("text", "json_object", "json_schema"):
        _fail(f"{where}.type", "must be one of text, json_object, json_schema", "invalid_value")
    if kind == "json_schema":
        _object(value.get("json_schema"), f"{where}.json_schema")
        schema = value["json_schema"]
        _name(schema.get("name"), f"{where}.json_schema.name")
        if schema.get("schema") is not None:
            _object(schema["schema"], f"{where}.json_schema.schema")


def _schema(value: Any, where: str) -> None:
    """A tool's JSON Schema, as far as providers check it before a call (and the demo model
    reads it): an object whose ``type`` is a string or strings, whose ``properties`` are
    objects with the same rule and an ``enum`` array, whose ``required`` lists strings."""
    _object(value, where)
    kind = value.get("type")
    if kind is not None and not (
        isinstance(kind, str) or (isinstance(kind, list) and all(isinstance(k, str) for k in kind))
    ):
        _fail(f"{where}.type", "must be a string or an array of strings")
    properties = value.get("properties")
    if properties is not None:
        _object(properties, f"{where}.properties")
        for name, spec in properties.items():
            here = f"{where}.properties.{name}"
            if isinstance(spec, bool):
                continue  # JSON Schema's true (anything) and false (nothing)
            _object(spec, here)
            if spec.get("type") is not None and not isinstance(spec["type"], str | list):
                _fail(f"{here}.type", "must be a string or an array of strings")
            if spec.get("enum") is not None and not isinstance(spec["enum"], list):
                _fail(f"{here}.enum", "must be an array")
    required = value.get("required")
    if required is not None:
        if not isinstance(required, list):
            _fail(f"{where}.required", "must be an array of strings")
        for index, name in enumerate(required):
            _string(name, f"{where}.required[{index}]")


def _items(value: Any, where: str, each: Callable[[Any, str], None], dotted: bool) -> None:
    if not isinstance(value, list) or len(value) > MAX_TOOLS:
        _fail(where, f"must be an array of at most {MAX_TOOLS} items")
    for index, item in enumerate(value):
        here = f"{where}.{index}" if dotted else f"{where}[{index}]"
        _object(item, here)
        each(item, here)


# -- chat completions --------------------------------------------------------------------------


def _chat_tool(tool: dict, where: str) -> None:
    if tool.get("type", "function") != "function":
        _fail(f"{where}.type", "must be 'function'", "invalid_value")
    function = _object(tool.get("function"), f"{where}.function")
    _name(function.get("name"), f"{where}.function.name")
    if function.get("description") is not None:
        _string(function["description"], f"{where}.function.description")
    if function.get("parameters") is not None:
        _schema(function["parameters"], f"{where}.function.parameters")
    if function.get("strict") is not None:
        _boolean(function["strict"], f"{where}.function.strict")


def _chat_tool_choice(value: Any, where: str) -> None:
    if isinstance(value, str):
        if value not in ("none", "auto", "required"):
            _fail(where, "must be none, auto, required or a function object", "invalid_value")
        return
    _object(value, where)
    if value.get("type") != "function":
        _fail(f"{where}.type", "must be 'function'", "invalid_value")
    _object(value.get("function"), f"{where}.function")
    _name(value["function"].get("name"), f"{where}.function.name")


CHAT_FIELDS: dict[str, Callable[[Any, str], object]] = {
    "tools": lambda value, where: _items(value, where, _chat_tool, dotted=False),
    "tool_choice": _chat_tool_choice,
    "parallel_tool_calls": _boolean,
    "temperature": _number(0, 2),
    "top_p": _number(0, 1),
    "frequency_penalty": _number(-2, 2),
    "presence_penalty": _number(-2, 2),
    "max_tokens": _number(1, MAX_TOKENS, integer=True),
    "max_completion_tokens": _number(1, MAX_TOKENS, integer=True),
    "seed": _number(-MAX_SEED - 1, MAX_SEED, integer=True),
    "logprobs": _boolean,
    "top_logprobs": _number(0, 20, integer=True),
    "logit_bias": _logit_bias,
    "stop": _stop,
    "response_format": _response_format,
    "reasoning_effort": _string,
    "user": _string,
    "stream": _boolean,
    "stream_options": _object,
}


# -- Responses ---------------------------------------------------------------------------------


def _responses_tool(tool: dict, where: str) -> None:
    kind = tool.get("type")
    _name(kind, f"{where}.type")
    if kind == "function":
        _name(tool.get("name"), f"{where}.name")
        if tool.get("description") is not None:
            _string(tool["description"], f"{where}.description")
        if tool.get("parameters") is not None:
            _schema(tool["parameters"], f"{where}.parameters")
        if tool.get("strict") is not None:
            _boolean(tool["strict"], f"{where}.strict")
    elif kind == "namespace":
        _items(tool.get("tools"), f"{where}.tools", _responses_tool, dotted=False)
    # Built-in tools (web_search, local_shell…) are not sent on: any shape is harmless.


def _responses_tool_choice(value: Any, where: str) -> None:
    if isinstance(value, str):
        if value not in ("none", "auto", "required"):
            _fail(where, "must be none, auto, required or an object", "invalid_value")
        return
    _object(value, where)
    _name(value.get("type"), f"{where}.type")
    if value["type"] == "function":
        _name(value.get("name"), f"{where}.name")


def _context_management_entry(entry: dict, where: str) -> None:
    if entry.get("type") != "compaction":
        _fail(f"{where}.type", "must be compaction (the only kind there is)", "invalid_value")
    if entry.get("compact_threshold") is not None:
        _number(1, 100_000_000, integer=True)(
            entry["compact_threshold"], f"{where}.compact_threshold"
        )


RESPONSES_FIELDS: dict[str, Callable[[Any, str], object]] = {
    "context_management": lambda value, where: _items(
        value, where, _context_management_entry, dotted=False
    ),
    "tools": lambda value, where: _items(value, where, _responses_tool, dotted=False),
    "tool_choice": _responses_tool_choice,
    "parallel_tool_calls": _boolean,
    "temperature": _number(0, 2),
    "top_p": _number(0, 1),
    "max_output_tokens": _number(1, MAX_TOKENS, integer=True),
    "seed": _number(-MAX_SEED - 1, MAX_SEED, integer=True),
    "user": _string,
    "stream": _boolean,
    "store": _boolean,
    "metadata": _object,
    "reasoning": _object,
    "text": _object,
}


# -- Anthropic Messages ------------------------------------------------------------------------


def _messages_tool(tool: dict, where: str) -> None:
    if "input_schema" not in tool and isinstance(tool.get("type"), str):
        return  # a server tool (web_search_20250305…): not sent on
    _name(tool.get("name"), f"{where}.name")
    _schema(tool.get("input_schema"), f"{where}.input_schema")
    if tool.get("description") is not None:
        _string(tool["description"], f"{where}.description")


def _messages_tool_choice(value: Any, where: str) -> None:
    _object(value, where)
    kind = value.get("type")
    if kind not in ("auto", "any", "tool", "none"):
        _fail(f"{where}.type", "must be one of auto, any, tool, none", "invalid_value")
    if kind == "tool":
        _name(value.get("name"), f"{where}.name")
    if value.get("disable_parallel_tool_use") is not None:
        _boolean(value["disable_parallel_tool_use"], f"{where}.disable_parallel_tool_use")


def _thinking(value: Any, where: str) -> None:
    _object(value, where)
    if value.get("type") not in ("enabled", "disabled", "adaptive"):
        _fail(f"{where}.type", "must be one of enabled, disabled, adaptive", "invalid_value")
    if value.get("budget_tokens") is not None:
        _number(0, MAX_TOKENS, integer=True)(value["budget_tokens"], f"{where}.budget_tokens")


MESSAGES_FIELDS: dict[str, Callable[[Any, str], object]] = {
    "tools": lambda value, where: _items(value, where, _messages_tool, dotted=True),
    "tool_choice": _messages_tool_choice,
    "max_tokens": _number(1, MAX_TOKENS, integer=True),
    "temperature": _number(0, 1),
    "top_p": _number(0, 1),
    "top_k": _number(0, MAX_TOKENS, integer=True),
    "stop_sequences": lambda value, where: _string_list(value, where, dotted=True),
    "metadata": _object,
    "thinking": _thinking,
    "stream": _boolean,
}


def check(data: dict[str, Any], table: dict[str, Callable[[Any, str], object]]) -> None:
    """ApiError 400 naming the first forwarded field of ``data`` that ``table`` refuses
    (absent and null fields are not sent on, so they pass); its strings are then checked as
    message text is (no NUL, no lone surrogate, nesting bounded)."""
    for name, check_field in table.items():
        value = data.get(name)
        if value is not None:
            check_field(value, name)
            try:
                validation.check_text(value, name, 1)
            except validation.Invalid as error:
                raise invalid(str(error), code="invalid_value", param=name) from None


__all__ = ["CHAT_FIELDS", "MESSAGES_FIELDS", "RESPONSES_FIELDS", "check"]
