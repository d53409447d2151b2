"""The one validator of message data, used at every entrance (API, import), and scrubbing
for the render paths.

What passes here is what the chat, conversation and inspector pages, the engine and every
provider can always handle: a known role; content that is text, null or a list of typed
parts; tool calls in OpenAI's shape (only on assistant messages); every string encodable
Unicode without NUL; every number finite; nesting bounded.

Every check raises ``Invalid`` (a ``ValueError``) with a message that names the field and,
for nested data, the exact place (``tool_calls[1].function.arguments``), so an API answers a
4xx that says what and where and an import problem names the message. ``scrub_surrogates`` is
the other half: rows stored before these checks must still render, so pages replace lone
surrogates instead of failing.
"""

from __future__ import annotations

import math
import re
from typing import Any

MAX_TOOL_CALLS = 256
MAX_ID_CHARS = 200
MAX_DEPTH = 32
ROLES = frozenset(("system", "user", "assistant", "tool"))
# Part types whose "text" must be a string (OpenAI's, and the Responses API's in/out text).
TEXT_PART_TYPES = frozenset(("text", "input_text", "output_text"))
_SURROGATE = re.compile("[\ud800-\udfff]")


class Invalid(ValueError):
    """What is wrong with a message, and where (the caller adds file, line or message)."""


def lone_surrogate_at(text: str) -> int | None:
    """Index of the first lone surrogate in ``text`` (it cannot be encoded as UTF-8), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def check_text(value: Any, where: str, depth: int = 0) -> None:
    """Every string inside ``value`` (nested lists/dicts too) must be valid Unicode text
    (``depth``: how deep ``value`` itself is in what is checked, for the nesting limit)."""
    # Imports check millions of values: a clean value (nearly all) is walked once without
    # building any place names; only a bad one is walked again to say where.
    if not _clean(value, depth):
        _walk(value, where, depth)


def _clean(value: Any, depth: int) -> bool:
    """Whether ``_walk`` would find nothing wrong (the same rules, no messages)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(value, str):
        return "\x00" not in value and (value.isascii() or lone_surrogate_at(value) is None)
    if isinstance(value, dict):
        return all(
            _clean(key, depth + 1) and _clean(item, depth + 1) for key, item in value.items()
        )
    if isinstance(value, list | tuple):
        return all(_clean(item, depth + 1) for item in value)
    if isinstance(value, float):
        return math.isfinite(value)
    return True


def _walk(value: Any, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise Invalid(f"{where}: nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        at = lone_surrogate_at(value)
        if at is not None:
            raise Invalid(
                f"{where}: contains a lone surrogate (U+{ord(value[at]):04X}) at character {at}; "
                "send valid UTF-8 text"
            )
        if "\x00" in value:  # PostgreSQL's text and jsonb cannot hold it: refuse it everywhere
            raise Invalid(
                f"{where}: contains a NUL character (U+0000) at character {value.index(chr(0))}"
            )
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise Invalid(f"{where}: {value} is not a finite number")
    elif isinstance(value, dict):
        for key, item in value.items():
            _walk(key, f"{where} (a key)", depth + 1)
            _walk(item, f"{where}.{key}", depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _walk(item, f"{where}[{index}]", depth + 1)


def check_tool_calls(value: Any, where: str = "tool_calls") -> None:
    """OpenAI's shape: ``[{"id": str, "type": "function", "function": {"name": str,
    "arguments": str}}]`` — what every page, the engine and every provider expect."""
    if value is None:
        return
    if not isinstance(value, list):
        raise Invalid(f"{where}: must be a list of tool calls")
    if len(value) > MAX_TOOL_CALLS:
        raise Invalid(f"{where}: {len(value)} tool calls; at most {MAX_TOOL_CALLS}")
    for index, call in enumerate(value):
        here = f"{where}[{index}]"
        if not isinstance(call, dict):
            raise Invalid(f"{here}: must be an object with id, type and function")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id.strip() or len(call_id) > MAX_ID_CHARS:
            raise Invalid(f"{here}.id: must be a non-empty string of at most {MAX_ID_CHARS}")
        if call.get("type", "function") != "function":
            raise Invalid(f"{here}.type: must be 'function'")
        function = call.get("function")
        if not isinstance(function, dict):
            raise Invalid(f"{here}.function: must be an object with name and arguments")
        name = function.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_ID_CHARS:
            raise Invalid(
                f"{here}.function.name: must be a non-empty string of at most {MAX_ID_CHARS}"
            )
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            raise Invalid(f"{here}.function.arguments: must be a string (JSON text)")
    check_text(value, where)


def check_content(value: Any, where: str = "content") -> None:
    """A string, null, or a list of content parts each with a string ``type``."""
    if value is None or isinstance(value, str):
        check_text(value, where)
        return
    if not isinstance(value, list):
        raise Invalid(f"{where}: must be a string, a list of content parts, or null")
    for index, part in enumerate(value):
        here = f"{where}[{index}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str) or not part["type"]:
            raise Invalid(f"{here}: must be an object with a string 'type'")
        if part["type"] in TEXT_PART_TYPES and not isinstance(part.get("text"), str):
            raise Invalid(f"{here}.text: a text part needs a string 'text'")
        if part["type"] == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                raise Invalid(f"{here}.image_url: needs a string url")
    check_text(value, where)


def check_message(
    *,
    role: Any,
    content: Any = None,
    tool_calls: Any = None,
    tool_call_id: Any = "",
    tool_name: Any = "",
    reasoning: Any = None,
    extra: Any = None,
) -> None:
    """One whole message, field by field (the fields of ``Message``; ``extra`` is metadata).

    Raises:
        Invalid: naming the field and the place in it (``unknown role 'x'`` for the role).
    """
    if role not in ROLES:
        raise Invalid(f"unknown role {role!r}")
    check_content(content, "content")
    check_tool_calls(tool_calls, "tool_calls")
    if tool_calls and role != "assistant":
        raise Invalid(f"tool_calls: a {role} message carries tool calls")
    for name, value in (("tool_call_id", tool_call_id), ("tool_name", tool_name)):
        if not isinstance(value, str):
            raise Invalid(f"{name}: must be a string")
        check_text(value, name)
    check_text(reasoning, "reasoning")
    check_text(extra, "metadata")


def check_config_numbers(config: Any, where: str = "config") -> None:
    """Numbers a CompactionConfig override may hold: finite, and integers of sane size (an
    integer of 400 digits passes the engine's type check, then overflows in its float math)."""
    if not isinstance(config, dict):
        return
    for key, value in config.items():
        here = f"{where}.{key}"
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            limit = 100_000_000 if key == "context_length" else 10**12
            if abs(value) > limit:
                raise Invalid(f"{here}: {_short(value)} is out of range (at most {limit:,})")
        elif isinstance(value, float) and not math.isfinite(value):
            raise Invalid(f"{here}: {value} is not a finite number")
        check_text(value, here)


def _short(value: int) -> str:
    digits = str(abs(value)) if abs(value).bit_length() < 4_000 else None
    if digits is None or len(digits) > 20:
        return f"a number of about {int(abs(value).bit_length() * 0.30103) + 1:,} digits"
    return str(value)


def scrub_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (cheap when there is none)."""
    if lone_surrogate_at(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)
