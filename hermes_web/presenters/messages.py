"""One stored message as a page shows it: text, images (inline ``data:`` only), tool calls with
their anchors, JSON fields, and the word diff of a before/after pair (pure: dicts in and out)."""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from compaction.messages import content_text, is_image_part, parse_arguments

SAFE_IMAGE_RE = re.compile(r"^data:image/(png|jpeg|jpg|gif|webp);base64,[A-Za-z0-9+/=\s]+$")
PREVIEW_CHARS = 3_000


def percent_of(part: Any, whole: Any) -> float:
    """``part`` as a percentage of ``whole`` (2 decimals); 0.0 when either is not a number."""
    try:
        return round(100.0 * float(part) / float(whole), 2) if whole else 0.0
    except (TypeError, ValueError):
        return 0.0


def image_views(content: Any) -> list[dict[str, str]]:
    """Each image part of a content value as ``{"src", "label"}``, for the chat and the inspector.

    ``src`` is set only for an inline ``data:image/...;base64`` URL; any other URL
    (``javascript:``, remote hosts) is only ``label`` text, never fetched or linked.
    """
    images: list[dict[str, str]] = []
    if not isinstance(content, list):
        return images
    for part in content:
        if not is_image_part(part):
            continue
        url = part.get("image_url")
        url = url.get("url") if isinstance(url, Mapping) else url
        url = str(url or part.get("url") or "")
        if SAFE_IMAGE_RE.match(url):
            images.append({"src": url, "label": ""})
        else:
            images.append({"src": "", "label": url[:200] or "(image)"})
    return images


def anchor_for(tool_call_id: str) -> str:
    """A DOM id fragment for a tool call id: safe characters plus a short hash (ids vary wildly)."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", tool_call_id)[:48]
    digest = hashlib.sha1(tool_call_id.encode()).hexdigest()[:6]
    return f"{safe}-{digest}"


def message_view(
    message: Mapping[str, Any], *, max_tokens: int = 0, preview_chars: int = PREVIEW_CHARS
) -> dict[str, Any]:
    """What the conversation view prints for one message (text is escaped by the template).

    Images become thumbnails only for inline ``data:image/...;base64`` URLs; any other image
    URL (``javascript:``, remote hosts) is shown as text and never fetched or linked.
    """
    content = message.get("content")
    images = image_views(content)
    text = content_text(content, images=False)
    calls = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function") or {}
        arguments = function.get("arguments") if isinstance(function, Mapping) else ""
        parsed = parse_arguments(call)
        pretty = (
            json.dumps(parsed, indent=2, ensure_ascii=False) if parsed else str(arguments or "")
        )
        call_id = str(call.get("id") or "")
        calls.append(
            {
                "id": call_id,
                "anchor": anchor_for(call_id) if call_id else "",
                "name": str(function.get("name") or "") if isinstance(function, Mapping) else "",
                "arguments": pretty,
            }
        )
    reasoning = message.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, str):
        reasoning = json.dumps(reasoning, ensure_ascii=False, indent=2)
    tokens = int(message.get("token_count") or 0)
    tool_call_id = str(message.get("tool_call_id") or "")
    return {
        "text": text[:preview_chars],
        "truncated": max(0, len(text) - preview_chars),
        "chars": len(text),
        "images": images,
        "calls": calls,
        "reasoning": reasoning or "",
        "result_anchor": anchor_for(tool_call_id) if tool_call_id else "",
        "token_percent": percent_of(tokens, max_tokens) if max_tokens else 0.0,
        "fields": json_fields(text) if len(text) <= preview_chars else [],
        "preview": preview_line(text[:20_000]),
    }


def preview_line(text: str, chars: int = 90) -> str:
    """A one-line preview for people: a JSON tool result shows its fields' text (real line
    breaks, no ``\n`` escapes or quotes), everything on one line, at most ``chars``."""
    fields = json_fields(text) if len(text) <= 200_000 else []
    if fields:
        text = " · ".join(f"{f['key']}: {f['value']}" for f in fields)
    line = " ".join(text.split())
    return line if len(line) <= chars else line[: chars - 1] + "…"


def json_fields(text: str) -> list[dict[str, str]]:
    """A tool result that is a JSON object, as fields with their string values unescaped.

    ``{"output": "line 1\\nline 2", "exit_code": 0}`` shows ``output`` as two real lines
    instead of one escaped string. Anything else (not JSON, not an object) gives ``[]``.
    """
    if not text.startswith("{") or not text.rstrip().endswith("}"):
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    if not isinstance(value, dict):
        return []
    return [
        {
            "key": str(key),
            "value": item
            if isinstance(item, str)
            else json.dumps(item, indent=2, ensure_ascii=False),
        }
        for key, item in value.items()
    ]


def word_diff(before: str, after: str) -> dict[str, list[dict[str, str]]]:
    """Word-level diff of a before/after pair: runs of ``{"op": "same"|"del"|"ins", "text"}``.

    ``before`` gets the ``same`` and ``del`` runs, ``after`` the ``same`` and ``ins`` runs;
    whitespace is kept so each side reads as its original text.
    """
    a, b = re.split(r"(\s+)", before), re.split(r"(\s+)", after)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    left: list[dict[str, str]] = []
    right: list[dict[str, str]] = []

    def push(side: list[dict[str, str]], op: str, text: str) -> None:
        if not text:
            return
        if side and side[-1]["op"] == op:
            side[-1]["text"] += text
        else:
            side.append({"op": op, "text": text})

    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            push(left, "same", "".join(a[i1:i2]))
            push(right, "same", "".join(b[j1:j2]))
        else:
            push(left, "del", "".join(a[i1:i2]))
            push(right, "ins", "".join(b[j1:j2]))
    return {"before": left, "after": right}
