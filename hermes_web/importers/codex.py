"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Current files wrap each line as ``{"timestamp", "type", "payload"}`` with types
session_meta, response_item, event_msg and turn_context; older files put the session meta
on the first line and response items bare. Response items map onto OpenAI messages:
message (user/assistant/developer→system), function_call / custom_tool_call → an
assistant tool call (merged into the preceding assistant message), *_output → a tool
message with the same call_id, reasoning → the next assistant message's reasoning.
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
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_CODEX
ROLE_MAP = {"user": "user", "assistant": "assistant", "developer": "system", "system": "system"}
METADATA_TYPES = {"event_msg", "turn_context", "compacted", "state"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and "text" in p)
    return ""


def _output(value: Any) -> str:
    if isinstance(value, dict):  # {"output": "...", "metadata": {...}} in some versions
        return str(value.get("output") or value.get("content") or "")
    return "" if value is None else str(value)


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    messages: list[ParsedMessage] = []
    tool_names: dict[str, str] = {}
    session_id, model, created, title = "", "", None, ""
    reasoning: list[str] = []
    for number, text in iter_lines(stream, file):
        if isinstance(text, ImportProblem):
            raise text
        record = json_line(text, file, number)
        if not isinstance(record, dict):
            raise ImportProblem(
                file, number, f"expected a record object, got a JSON {type(record).__name__}"
            )
        kind, item = record.get("type"), record.get("payload")
        if kind == "session_meta" or (
            number == 1 and "payload" not in record and "instructions" in record
        ):
            meta = item if isinstance(item, dict) else record
            session_id = str(meta.get("id") or "")
            created = epoch(meta.get("timestamp"))
            model = str(meta.get("model") or "")
            continue
        if kind in METADATA_TYPES or record.get("record_type") == "state":
            if kind == "turn_context" and isinstance(item, dict):
                model = model or str(item.get("model") or "")
            continue
        if kind != "response_item":
            item = record  # the older, unwrapped form
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise ImportProblem(file, number, "record has no item 'type': not a Codex rollout")
        when = epoch(record.get("timestamp"))
        itype = item["type"]
        if itype == "message":
            role = ROLE_MAP.get(item.get("role"))
            if role is None:
                raise ImportProblem(file, number, f"unknown role {item.get('role')!r}")
            body = _text(item.get("content"))
            message = ParsedMessage(role=role, content=body, created_at=when)
            if role == "assistant" and reasoning:
                message.reasoning, reasoning = "\n".join(reasoning), []
            messages.append(message)
            if role == "user" and not title and not body.lstrip().startswith("<"):
                title = body
        elif itype in ("function_call", "custom_tool_call", "local_shell_call"):
            call_id = str(item.get("call_id") or item.get("id") or "")
            name = str(item.get("name") or ("shell" if itype == "local_shell_call" else ""))
            arguments = item.get("arguments", item.get("input", item.get("action", "")))
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            tool_names[call_id] = name
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant":
                last.tool_calls = (last.tool_calls or []) + [call]
            else:
                message = ParsedMessage(
                    role="assistant", content=None, tool_calls=[call], created_at=when
                )
                if reasoning:
                    message.reasoning, reasoning = "\n".join(reasoning), []
                messages.append(message)
        elif itype in (
            "function_call_output",
            "custom_tool_call_output",
            "local_shell_call_output",
        ):
            call_id = str(item.get("call_id") or "")
            messages.append(
                ParsedMessage(
                    role="tool",
                    content=_output(item.get("output")),
                    tool_call_id=call_id,
                    tool_name=tool_names.get(call_id, ""),
                    created_at=when,
                )
            )
        elif itype == "reasoning":
            summary = item.get("summary") or []
            reasoning.extend(p.get("text", "") for p in summary if isinstance(p, dict))
    if not messages:
        raise ImportProblem(file, 0, "no response items: not a Codex rollout")
    yield ParsedSession(
        source=SOURCE,
        public_id=session_id,
        title=" ".join(title.split())[:80],
        model=model,
        messages=messages,
        created_at=created,
        line=1,
    )
