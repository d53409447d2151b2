"""Checks for message data at the entrances (API, chat) and scrubbing for the render paths.

Every check raises ``ValueError`` with a message that names the field and, for nested data,
the exact place (``tool_calls[1].function.arguments``), so an API answers a 4xx that says what
and where. ``scrub_surrogates`` is the other half: rows stored before these checks (or by an
older importer) must still render, so pages replace lone surrogates instead of failing.
"""

from __future__ import annotations

import math
import re
from typing import Any

MAX_TOOL_CALLS = 256
MAX_ID_CHARS = 200
MAX_DEPTH = 32
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate_at(text: str) -> int | None:
    """Index of the first lone surrogate in ``text`` (it cannot be encoded as UTF-8), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def check_text(value: Any, where: str) -> None:
    """Every string inside ``value`` (nested lists/dicts too) must be valid Unicode text."""
    _walk(value, where, 0)


def _walk(value: Any, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"{where}: nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        at = lone_surrogate_at(value)
        if at is not None:
            raise ValueError(
                f"{where}: contains a lone surrogate (U+{ord(value[at]):04X}) at character {at}; "
                "send valid UTF-8 text"
            )
        if "\x00" in value:  # PostgreSQL's text and jsonb cannot hold it: refuse it everywhere
            raise ValueError(
                f"{where}: contains a NUL character (U+0000) at character {value.index(chr(0))}"
            )
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: {value} is not a finite number")
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
        raise ValueError(f"{where}: must be a list of tool calls")
    if len(value) > MAX_TOOL_CALLS:
        raise ValueError(f"{where}: {len(value)} tool calls; at most {MAX_TOOL_CALLS}")
    for index, call in enumerate(value):
        here = f"{where}[{index}]"
        if not isinstance(call, dict):
            raise ValueError(f"{here}: must be an object with id, type and function")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id.strip() or len(call_id) > MAX_ID_CHARS:
            raise ValueError(f"{here}.id: must be a non-empty string of at most {MAX_ID_CHARS}")
        if call.get("type", "function") != "function":
            raise ValueError(f"{here}.type: must be 'function'")
        function = call.get("function")
        if not isinstance(function, dict):
            raise ValueError(f"{here}.function: must be an object with name and arguments")
        name = function.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_ID_CHARS:
            raise ValueError(
                f"{here}.function.name: must be a non-empty string of at most {MAX_ID_CHARS}"
            )
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            raise ValueError(f"{here}.function.arguments: must be a string (JSON text)")
    check_text(value, where)


def check_content(value: Any, where: str = "content") -> None:
    """A string, null, or a list of content parts each with a string ``type``."""
    if value is None or isinstance(value, str):
        check_text(value, where)
        return
    if not isinstance(value, list):
        raise ValueError(f"{where}: must be a string, a list of content parts, or null")
    for index, part in enumerate(value):
        here = f"{where}[{index}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise ValueError(f"{here}: must be an object with a string 'type'")
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise ValueError(f"{here}.text: a text part needs a string 'text'")
        if part["type"] == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                raise ValueError(f"{here}.image_url: needs a string url")
    check_text(value, where)


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
                raise ValueError(f"{here}: {_short(value)} is out of range (at most {limit:,})")
        elif isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{here}: {value} is not a finite number")
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
