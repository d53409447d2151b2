"""OpenAI chat format: a JSON list of messages, or an object with ``messages``.

A single JSON document has to be parsed whole (the stdlib has no streaming JSON reader),
so the file is bounded by HERMES_MAX_UPLOAD_BYTES before it is read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

from hermes_web.importers.base import (
    ImportProblem,
    ParsedMessage,
    ParsedSession,
    check_role,
    max_bytes,
    text_of,
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_OPENAI
_FIELDS = {
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "name",
    "reasoning",
    "reasoning_content",
}


def parse_message(item: Any, index: int, file: str) -> ParsedMessage:
    where = f"message {index + 1}"
    if not isinstance(item, dict):
        raise ImportProblem(file, 0, f"{where} is a JSON {type(item).__name__}, not an object")
    try:
        role = check_role(item.get("role"), file, 0)
    except ImportProblem as problem:
        raise ImportProblem(file, 0, f"{where}: {problem.problem}") from None
    calls = item.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise ImportProblem(file, 0, f"{where}: tool_calls is not a list")
    return ParsedMessage(
        role=role,
        content=item.get("content"),
        tool_calls=calls or None,
        tool_call_id=str(item.get("tool_call_id") or ""),
        tool_name=str(item.get("name") or "") if role == "tool" else "",
        reasoning=item.get("reasoning") or item.get("reasoning_content") or None,
        extra={k: v for k, v in item.items() if k not in _FIELDS},
    )


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    raw = stream.read(max_bytes() + 1)
    if len(raw) > max_bytes():
        raise ImportProblem(file, 0, f"file larger than {max_bytes() // 2**20} MB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ImportProblem(file, line, f"not valid UTF-8 (byte {error.start})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as error:
        raise ImportProblem(
            file, error.lineno, f"broken JSON: {error.msg} at column {error.colno}"
        ) from None
    except ValueError as error:  # an integer over Python's 4,300-digit conversion limit
        raise ImportProblem(file, 0, f"unreadable number: {error}") from None
    except RecursionError:
        raise ImportProblem(file, 1, "JSON nested too deeply to read") from None
    title, model = "", ""
    if isinstance(doc, dict):
        if not isinstance(doc.get("messages"), list):
            raise ImportProblem(
                file, 1, "expected a list of messages or an object with a 'messages' list"
            )
        title, model = str(doc.get("title") or ""), str(doc.get("model") or "")
        doc = doc["messages"]
    if not isinstance(doc, list):
        raise ImportProblem(
            file, 1, "expected a list of messages or an object with a 'messages' list"
        )
    if not doc:
        raise ImportProblem(file, 1, "the conversation has no messages")
    messages = [parse_message(item, i, file) for i, item in enumerate(doc)]
    if not title:
        first_user = next((m for m in messages if m.role == "user"), None)
        title = text_of(first_user.content)[:80] if first_user else ""
    yield ParsedSession(source=SOURCE, title=title.strip(), model=model, messages=messages, line=1)
