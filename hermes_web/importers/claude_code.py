"""Claude Code transcripts (``~/.claude/projects/<dir>/<session>.jsonl``).

Records of ``type`` user/assistant carry ``message`` (Anthropic format: content is a string
or blocks text/thinking/tool_use/tool_result) plus uuid/parentUuid/sessionId/timestamp.
One API response is often split over several assistant records sharing ``message.id``;
they are merged into one OpenAI assistant message. tool_result blocks become tool messages
with the tool_use id. Other record types (summary, system, file-history-snapshot…) are
metadata; a ``summary`` record titles the session.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

from hermes_web.importers.base import (
    ImportProblem,
    ParsedMessage,
    ParsedSession,
    epoch,
    iter_lines,
    json_line,
    text_of,
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_CLAUDE_CODE
MESSAGE_TYPES = {"user", "assistant"}


def _result_content(value: Any) -> Any:
    if isinstance(value, list):
        parts = []
        for block in value:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append({"type": "text", "text": block.get("text", "")})
            elif isinstance(block, dict) and block.get("type") == "image":
                parts.append(block)
        return (
            parts
            if any(p.get("type") != "text" for p in parts)
            else "\n".join(p["text"] for p in parts)
        )
    return "" if value is None else value


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """The whole file is one session: any bad line fails it (a transcript with a hole is wrong)."""
    messages: list[ParsedMessage] = []
    tool_names: dict[str, str] = {}
    session_id, title, model, first_time = "", "", "", None
    last_message_id = None
    for number, text in iter_lines(stream, file):
        if isinstance(text, ImportProblem):
            raise text
        record = json_line(text, file, number)
        if not isinstance(record, dict):
            raise ImportProblem(
                file, number, f"expected a record object, got a JSON {type(record).__name__}"
            )
        kind = record.get("type")
        if kind == "summary" and isinstance(record.get("summary"), str):
            title = title or record["summary"]
            continue
        if kind not in MESSAGE_TYPES:
            if not isinstance(kind, str):
                raise ImportProblem(
                    file, number, "record has no 'type': not a Claude Code transcript"
                )
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            raise ImportProblem(file, number, f"{kind} record has no 'message' object")
        role = message.get("role")
        if role != kind:
            raise ImportProblem(file, number, f"unknown role {role!r} in a {kind} record")
        session_id = session_id or str(record.get("sessionId") or "")
        when = epoch(record.get("timestamp"))
        first_time = first_time or when
        extra = {
            k: record[k]
            for k in ("uuid", "parentUuid", "timestamp", "cwd", "gitBranch")
            if record.get(k)
        }
        content = message.get("content")
        if kind == "assistant":
            model = model or str(message.get("model") or "")
            texts, calls, thinking = [], [], []
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list):
                raise ImportProblem(
                    file, number, "assistant content is neither text nor a list of blocks"
                )
            for block in blocks:
                if not isinstance(block, dict):
                    raise ImportProblem(file, number, "a content block is not an object")
                btype = block.get("type")
                if btype == "text":
                    texts.append(block.get("text") or "")
                elif btype == "thinking":
                    thinking.append(block.get("thinking") or "")
                elif btype == "tool_use":
                    call_id = str(block.get("id") or "")
                    tool_names[call_id] = str(block.get("name") or "")
                    calls.append(
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": tool_names[call_id],
                                "arguments": json.dumps(
                                    block.get("input") or {}, ensure_ascii=False
                                ),
                            },
                        }
                    )
            same = (
                message.get("id")
                and message.get("id") == last_message_id
                and messages
                and messages[-1].role == "assistant"
            )
            if same:
                previous = messages[-1]
                joined = "\n".join(t for t in (previous.content or "", *texts) if t)
                previous.content = joined or None
                previous.tool_calls = (previous.tool_calls or []) + calls or None
                if thinking:
                    previous.reasoning = "\n".join(
                        t for t in (previous.reasoning or "", *thinking) if t
                    )
            else:
                messages.append(
                    ParsedMessage(
                        role="assistant",
                        content="\n".join(t for t in texts if t) or None,
                        tool_calls=calls or None,
                        reasoning="\n".join(thinking) or None,
                        extra=extra,
                        created_at=when,
                    )
                )
            last_message_id = message.get("id")
            continue
        last_message_id = None
        if isinstance(content, str):
            messages.append(
                ParsedMessage(role="user", content=content, extra=extra, created_at=when)
            )
            title = title or content
            continue
        if not isinstance(content, list):
            raise ImportProblem(file, number, "user content is neither text nor a list of blocks")
        user_parts = []
        for block in content:
            if not isinstance(block, dict):
                raise ImportProblem(file, number, "a content block is not an object")
            if block.get("type") == "tool_result":
                call_id = str(block.get("tool_use_id") or "")
                messages.append(
                    ParsedMessage(
                        role="tool",
                        content=_result_content(block.get("content")),
                        tool_call_id=call_id,
                        tool_name=tool_names.get(call_id, ""),
                        extra={**extra, **({"is_error": True} if block.get("is_error") else {})},
                        created_at=when,
                    )
                )
            elif block.get("type") == "text":
                user_parts.append({"type": "text", "text": block.get("text") or ""})
            elif block.get("type") == "image":
                user_parts.append(block)
        if user_parts:
            only_text = all(p["type"] == "text" for p in user_parts)
            value = "\n".join(p["text"] for p in user_parts) if only_text else user_parts
            messages.append(ParsedMessage(role="user", content=value, extra=extra, created_at=when))
            title = title or text_of(value)
    if not messages:
        raise ImportProblem(file, 0, "no user or assistant records: not a Claude Code transcript")
    yield ParsedSession(
        source=SOURCE,
        public_id=session_id,
        title=" ".join(title.split())[:80],
        model=model,
        messages=messages,
        created_at=first_time,
        line=1,
    )
