"""Continue sessions (``~/.continue/sessions/<session id>.json``), as written by Continue
0.8–1.x for VS Code and JetBrains.

A session is ``{sessionId, title, workspaceDirectory, history, mode?, chatModelTitle?}``;
each history item is ``{message, contextItems, editorState?, promptLogs?, toolCallState?,
reasoning?, conversationSummary?}`` (older files put ``role`` / ``content`` on the item
itself). Messages map onto OpenAI ones: ``role`` user / assistant / system / tool
(``toolCallId``), ``content`` as text or parts (``text``, ``imageUrl``), assistant
``toolCalls``; a ``thinking`` message (or the item's ``reasoning``) is the next assistant
message's reasoning. A call answered only in its ``toolCallState`` (its ``output`` context
items) gets that as its result. The context items attached to a user message (files,
code, docs picked with @) are kept as a meta row after it. ``conversationSummary`` (the
``/compact`` command) is a native compaction (source ``continue``): the items up to it are
archived and the summary follows them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from hermes_web.importers.agent_common import (
    as_text,
    call,
    clip_title,
    compact,
    expect,
    load_json,
    summary_row,
)
from hermes_web.importers.base import (
    ImportProblem,
    NativeCompaction,
    ParsedMessage,
    ParsedSession,
    image_part,
    safe_id,
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_CONTINUE
ROLES = ("user", "assistant", "system", "tool", "thinking")


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    document = load_json(stream, file)
    if not isinstance(document, dict) or not isinstance(document.get("history"), list):
        raise ImportProblem(
            file, 0, "not a Continue session: expected an object with a 'history' list"
        )
    yield _session(document, file)


def _content(value: Any, file: str, where: str) -> Any:
    if value is None or isinstance(value, str):
        return value or ""
    expect(value, list, file, f"{where}: content")
    parts: list[dict] = []
    for part in value:
        part = expect(part, dict, file, f"{where}: a content part")
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind in ("imageUrl", "image_url"):
            url = part.get("imageUrl") or part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            if not isinstance(url, str):
                raise ImportProblem(file, 0, f"{where}: an image part has no url")
            parts.append(image_part(url))
        else:
            raise ImportProblem(file, 0, f"{where}: unknown content part type {kind!r}")
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _context_text(items: list) -> str:
    blocks = []
    for item in items:
        if not isinstance(item, dict):
            continue
        name = item.get("name") or item.get("description") or "context"
        body = item.get("content")
        blocks.append(f"### {name}\n{body if isinstance(body, str) else as_text(body)}")
    return "\n\n".join(blocks)


def _tool_states(item: dict) -> list[dict]:
    states = item.get("toolCallStates")
    if isinstance(states, list):
        return [s for s in states if isinstance(s, dict)]
    state = item.get("toolCallState")
    return [state] if isinstance(state, dict) else []


def _session(document: dict, file: str) -> ParsedSession:
    session_id = document.get("sessionId")
    session = ParsedSession(source=SOURCE, line=1)
    session.public_id = safe_id(session_id if isinstance(session_id, str) else Path(file).stem)
    title = document.get("title")
    info = {
        k: document[k]
        for k in ("workspaceDirectory", "mode", "chatModelTitle", "usage")
        if document.get(k)
    }
    session.extra = {"continue": info}
    if isinstance(document.get("chatModelTitle"), str):
        session.model = document["chatModelTitle"]
    history = document["history"]
    answered = {
        m.get("toolCallId")
        for i in history
        if isinstance(i, dict)
        for m in [i.get("message") if isinstance(i.get("message"), dict) else i]
        if isinstance(m, dict) and m.get("role") == "tool"
    }
    thinking: list[str] = []
    names: dict[str, str] = {}
    first_user = ""
    for number, item in enumerate(history, 1):
        where = f"history item {number}"
        item = expect(item, dict, file, where)
        session.records += 1
        message = item.get("message") if "message" in item else item
        message = expect(message, dict, file, f"{where}: message")
        role = message.get("role")
        if role not in ROLES:
            raise ImportProblem(
                file,
                0,
                f"{where}: unknown role {role!r} (expected user, assistant, tool or thinking)",
            )
        content = _content(message.get("content"), file, where)
        if role == "thinking":
            thinking.append(content if isinstance(content, str) else as_text(content))
            continue
        row = ParsedMessage(role=role, content=content, extra={"history_item": number})
        if isinstance(message.get("id"), str):
            row.extra["continue_id"] = message["id"]
        if role == "assistant":
            reasoning = item.get("reasoning")
            if isinstance(reasoning, dict) and isinstance(reasoning.get("text"), str):
                thinking.append(reasoning["text"])
            if thinking:
                row.reasoning, thinking = "\n".join(thinking), []
            calls = expect(message.get("toolCalls") or [], list, file, f"{where}: toolCalls")
            row.tool_calls = [_call(c, file, where) for c in calls] or None
            names.update({c["id"]: c["function"]["name"] for c in row.tool_calls or ()})
            if not content:
                row.content = None
        if role == "tool":
            call_id = message.get("toolCallId")
            if not isinstance(call_id, str) or not call_id:
                raise ImportProblem(file, 0, f"{where}: a tool message has no string toolCallId")
            row.tool_call_id, row.tool_name = call_id, names.get(call_id, "")
        session.messages.append(row)
        if role == "assistant":
            for state in _tool_states(item):
                tool_call = state.get("toolCall")
                call_id = state.get("toolCallId") or (
                    tool_call.get("id") if isinstance(tool_call, dict) else None
                )
                output, status = state.get("output"), state.get("status")
                if output is None and isinstance(status, str) and status != "done":
                    output = f"[tool call {status} in Continue]"  # canceled, errored, ...
                if isinstance(call_id, str) and call_id not in answered and output is not None:
                    body = _context_text(output) if isinstance(output, list) else as_text(output)
                    session.messages.append(
                        ParsedMessage(
                            role="tool",
                            content=body,
                            tool_call_id=call_id,
                            tool_name=names.get(call_id, ""),
                            extra={"tool_call_state": state.get("status", "")},
                        )
                    )
                    answered.add(call_id)
        if role == "user":
            first_user = first_user or (content if isinstance(content, str) else as_text(content))
            items = item.get("contextItems")
            if isinstance(items, list) and items:
                session.messages.append(
                    ParsedMessage(
                        role="user",
                        content=_context_text(items),
                        meta="context_items",
                        extra={"history_item": number, "count": len(items)},
                    )
                )
                session.skip("context items (kept as a meta row)", len(items))
        summary = item.get("conversationSummary")
        if isinstance(summary, str) and summary.strip():
            compaction = NativeCompaction(
                source="continue", summary=summary, extra={"history_item": number}
            )
            index = compact(session, session.messages, compaction)
            session.messages.append(summary_row(summary, index, {"history_item": number}))
    if not any(not m.meta for m in session.messages):
        raise ImportProblem(file, 0, "the session's history is empty: nothing to import")
    generic = not isinstance(title, str) or title in ("", "New Session", "Untitled Session")
    session.title = clip_title(first_user if generic or not isinstance(title, str) else title)
    return session


def _call(value: Any, file: str, where: str) -> dict:
    value = expect(value, dict, file, f"{where}: a tool call")
    function = value.get("function")
    call_id = value.get("id")
    if not isinstance(call_id, str) or not call_id or not isinstance(function, dict):
        raise ImportProblem(file, 0, f"{where}: a tool call has no string id and function")
    name = function.get("name")
    if not isinstance(name, str):
        raise ImportProblem(file, 0, f"{where}: tool call {call_id}: name is not text")
    return call(call_id, name, function.get("arguments"))
