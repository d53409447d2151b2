"""How chat messages are shown: Markdown made safe, tool calls paired with their results.

Markdown from a model is rendered with python-markdown and then sanitized with nh3 (an
allow-list: no scripts, no event handlers, no ``javascript:`` links, no remote images), so a
reply can format text but never run anything. Tool output is never rendered as Markdown, only
escaped by the template. Images are shown only from ``data:image/...;base64`` parts of a
message, never from URLs a model wrote.
"""

from __future__ import annotations

import json
import re
from typing import Any

import markdown as markdown_lib
import nh3

from compaction.messages import content_text
from compaction.slimming import fold_tool_result
from hermes_web.models import Message
from hermes_web.validation import scrub_surrogates

ALLOWED_TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "code",
    "dd",
    "del",
    "details",
    "div",
    "dl",
    "dt",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "kbd",
    "li",
    "ol",
    "p",
    "pre",
    "s",
    "span",
    "strong",
    "sub",
    "summary",
    "sup",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "abbr": {"title"}, "th": {"align"}, "td": {"align"}}
DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|jpg|gif|webp);base64,[A-Za-z0-9+/=\s]+$")
OUTPUT_PREVIEW_CHARS = 20_000


def render_markdown(text: str) -> str:
    """Safe HTML for a model's Markdown (the only string a template may mark safe)."""
    html = markdown_lib.markdown(
        # nh3 (Rust) takes only valid Unicode: a stored lone surrogate becomes U+FFFD.
        scrub_surrogates(text),
        extensions=["fenced_code", "tables", "sane_lists"],
        output_format="html",
    )
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


def content_images(content: Any) -> list[dict[str, str]]:
    images = []
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in (
                "image_url",
                "input_image",
                "image",
            ):
                continue
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            url = str(url or "")
            if DATA_IMAGE.match(url):
                images.append({"src": url, "label": ""})
            else:
                images.append({"src": "", "label": url[:120] or "image"})
    return images


def _pretty_arguments(raw: Any) -> tuple[dict, str]:
    if isinstance(raw, dict):
        return raw, json.dumps(raw, indent=2, ensure_ascii=False)
    try:
        parsed = json.loads(raw or "{}")
    except ValueError:
        return {}, str(raw)
    if not isinstance(parsed, dict):
        return {}, str(raw)
    return parsed, json.dumps(parsed, indent=2, ensure_ascii=False)


def _pretty_output(text: str) -> str:
    # JSON tool outputs read better unwrapped: numbered file content, terminal output.
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict):
        for key in ("content", "output"):
            if isinstance(data.get(key), str) and len(data) <= 6:
                rest = {k: v for k, v in data.items() if k != key}
                return f"{json.dumps(rest, ensure_ascii=False)}\n\n{data[key]}"
        return json.dumps(data, indent=2, ensure_ascii=False)
    return text


def chat_items(rows: list[Message]) -> list[dict[str, Any]]:
    """Display items: each assistant message carries its calls with their results inlined."""
    results = {
        row.tool_call_id: row for row in rows if row.role == Message.Role.TOOL and row.tool_call_id
    }
    paired: set[int] = set()
    items = []
    for row in rows:
        if row.role == Message.Role.TOOL and row.pk in paired:
            continue
        text = content_text(row.content, images=False)
        item: dict[str, Any] = {
            "row": row,
            "role": row.role,
            "text": text,
            "images": content_images(row.content),
            "reasoning": content_text(row.reasoning, images=False) if row.reasoning else "",
            "html": render_markdown(text) if row.role == Message.Role.ASSISTANT and text else "",
            "calls": [],
        }
        # Stored rows may predate the entrance checks: a call that is not an object, or an
        # object without a function, still renders (as "?") instead of failing the page.
        calls = row.tool_calls if isinstance(row.tool_calls, list) else []
        for raw_call in calls:
            call = raw_call if isinstance(raw_call, dict) else {}
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            name = str(function.get("name") or "?")
            args, pretty = _pretty_arguments(function.get("arguments"))
            call_id = call.get("id") if isinstance(call.get("id"), str) else ""
            result = results.get(call_id)
            entry: dict[str, Any] = {
                "id": call_id,
                "name": name,
                "arguments": pretty,
                "one_line": "",
                "output": "",
                "output_chars": 0,
                "pending": result is None,
            }
            if result is not None:
                paired.add(result.pk)
                output = content_text(result.content, images=False)
                entry["one_line"] = fold_tool_result(name, args, output)
                entry["output_chars"] = len(output)
                pretty_output = _pretty_output(output)
                entry["output"] = pretty_output[:OUTPUT_PREVIEW_CHARS]
                entry["output_cut"] = max(0, len(pretty_output) - OUTPUT_PREVIEW_CHARS)
                entry["error"] = output.startswith('{"error"')
            item["calls"].append(entry)
        if row.role == Message.Role.TOOL:
            item["one_line"] = fold_tool_result(row.tool_name or "tool", {}, text)
            item["output"] = _pretty_output(text)[:OUTPUT_PREVIEW_CHARS]
        items.append(item)
    return items
