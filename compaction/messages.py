"""Small helpers over OpenAI chat-format message dicts (read-only)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "IMAGE_PART_TYPES",
    "Message",
    "call_id_variants",
    "content_text",
    "has_visible_text",
    "image_part_count",
    "is_data_image",
    "is_image_part",
    "parse_arguments",
    "parse_arguments_text",
    "tool_call_id",
    "tool_call_name",
    "tool_calls",
]

Message = Mapping[str, Any]
"""An OpenAI chat message: ``role``, ``content`` (str | list of parts | None), ``tool_calls``,
``tool_call_id``, ``name``, optionally ``reasoning`` / ``reasoning_content``."""

IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})


def is_image_part(part: Any) -> bool:
    """True when a content part is an image (``image_url``, ``input_image`` or ``image``)."""
    # ``type(...) is dict`` first: the ABC check is slow and nearly every part is a dict.
    return (type(part) is dict or isinstance(part, Mapping)) and part.get(
        "type"
    ) in IMAGE_PART_TYPES


def _image_url(part: Mapping[str, Any]) -> str:
    url = part.get("image_url")
    if isinstance(url, Mapping):
        url = url.get("url")
    if url is None and isinstance(part.get("source"), Mapping):
        source = part["source"]
        return "data:" if source.get("data") else str(source.get("url") or "")
    return url if isinstance(url, str) else ""


def is_data_image(part: Any) -> bool:
    """True when an image part carries inline data (a ``data:`` URL or base64 source)."""
    if not is_image_part(part):
        return False
    url = _image_url(part)
    return not url.startswith(("http://", "https://"))


def image_part_count(content: Any) -> int:
    """Number of image parts in a message content value."""
    if not isinstance(content, list):
        return 0
    return sum(1 for part in content if is_image_part(part))


def content_text(content: Any, *, images: bool = True) -> str:
    """Flatten a content value to text.

    Text parts are joined with newlines; images become ``[image]`` (inline data) or
    ``[image: URL]`` (``images=False`` drops them); other parts become ``[<type>]``.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces: list[str] = []
        for part in content:
            if isinstance(part, str):
                pieces.append(part)
            elif type(part) is not dict and not isinstance(part, Mapping):
                pieces.append(str(part))
            elif part.get("type") in ("text", "input_text", "output_text"):
                pieces.append(str(part.get("text") or ""))
            elif is_image_part(part):
                if images:
                    url = _image_url(part)
                    is_http = url.startswith(("http://", "https://"))
                    pieces.append(f"[image: {url}]" if is_http else "[image]")
            else:
                pieces.append(f"[{part.get('type', 'part')}]")
        return "\n".join(pieces)
    if isinstance(content, Mapping):
        return json.dumps(content, ensure_ascii=False, default=str)
    return str(content)


def has_visible_text(message: Message) -> bool:
    """True when the message has non-blank text content (images alone do not count)."""
    return bool(content_text(message.get("content"), images=False).strip())


def tool_calls(message: Message) -> list[Mapping[str, Any]]:
    """The assistant's tool calls as a list (empty when absent or malformed)."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [c for c in calls if type(c) is dict or isinstance(c, Mapping)]


def tool_call_id(call: Mapping[str, Any]) -> str | None:
    """The id of a tool call (``id``, else ``call_id``), or None when missing."""
    value = call.get("id") or call.get("call_id")
    return str(value) if value else None


def call_id_variants(call: Mapping[str, Any]) -> set[str]:
    """Every id spelling a result may use for this call.

    Covers ``id``, ``call_id``, ``response_item_id`` and the composite ``call|item`` form.
    """
    out: set[str] = set()
    for key in ("id", "call_id", "response_item_id"):
        value = call.get(key)
        if value:
            text = str(value)
            out.add(text)
            if "|" in text:
                out.update(p for p in text.split("|") if p)
    return out


def tool_call_name(call: Mapping[str, Any]) -> str:
    """The function name of a tool call, ``"unknown"`` when missing."""
    fn = call.get("function")
    name = fn.get("name") if type(fn) is dict or isinstance(fn, Mapping) else call.get("name")
    return str(name) if name else "unknown"


def parse_arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments as a dict; ``{}`` when missing or not valid JSON."""
    fn = call.get("function")
    raw = (
        fn.get("arguments")
        if type(fn) is dict or isinstance(fn, Mapping)
        else call.get("arguments")
    )
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str):
        return {}
    return parse_arguments_text(raw)


def parse_arguments_text(raw: str) -> dict[str, Any]:
    """Arguments given as a JSON string, as a dict; ``{}`` when empty or not a JSON object."""
    if not raw:
        return {}
    # The C scanner json.loads ends in, called directly: this runs once per tool call, and
    # json.loads's Python wrapper costs more than the scan of a small object. Anything it
    # does not take whole (surrounding whitespace, errors) goes through json.loads.
    try:
        value, end = _scan_json(raw, 0)
    except (StopIteration, ValueError):
        end = -1
    except RecursionError:
        return {}
    if end != len(raw):
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            return {}
    return value if type(value) is dict else {}


_scan_json: Any = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def raw_arguments(call: Mapping[str, Any]) -> str:
    """The call's arguments as the original string (JSON-encoded when given as a dict)."""
    fn = call.get("function")
    raw = (
        fn.get("arguments")
        if type(fn) is dict or isinstance(fn, Mapping)
        else call.get("arguments")
    )
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    return json.dumps(raw, ensure_ascii=False, default=str)


def iter_roles(messages: Sequence[Message]) -> Iterable[str]:
    """The role of each message (``""`` when missing)."""
    return (str(m.get("role") or "") for m in messages)
