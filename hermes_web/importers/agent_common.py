"""What the importers of other agents' files share (Gemini CLI, Aider, OpenHands, Cline /
Roo Code, Continue): reading a whole JSON document with a clear error, turning a tool
call's arguments into OpenAI form, and marking the rows an agent's own compaction replaced.

These agents write one JSON document per session (or a Markdown log, for Aider), small
enough to be read whole within the upload limit; the messages are built as a list and
paired, checked and stored by the shared code like every other format.
"""

from __future__ import annotations

import json
from typing import IO, Any

from hermes_web.importers.base import (
    UNREADABLE_NUMBER,
    ImportProblem,
    NativeCompaction,
    ParsedMessage,
    ParsedSession,
    broken_json,
)


def read_text(stream: IO[bytes], file: str) -> str:
    """The whole file as text; bytes that are not UTF-8 are named by position."""
    raw = stream.read()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ImportProblem(file, line, f"not valid UTF-8 (byte {error.start})") from None


def load_json(stream: IO[bytes], file: str) -> Any:
    """The whole file as one JSON document; a broken one is refused with its line and column."""
    text = read_text(stream, file)
    if not text.strip():
        raise ImportProblem(file, 0, "the file is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ImportProblem(file, error.lineno, broken_json(error)) from None
    except ValueError:  # an integer over Python's 4,300-digit conversion limit
        raise ImportProblem(file, 0, UNREADABLE_NUMBER) from None
    except RecursionError:
        raise ImportProblem(file, 0, "JSON nested too deeply to read") from None


def expect(value: Any, kind: type | tuple[type, ...], file: str, where: str, line: int = 0) -> Any:
    """``value`` if it is of ``kind``, else a problem naming what was found where."""
    if not isinstance(value, kind):
        names = kind if isinstance(kind, tuple) else (kind,)
        wanted = " or ".join(_JSON_NAMES.get(k, k.__name__) for k in names)
        found = _JSON_NAMES.get(type(value), type(value).__name__)
        raise ImportProblem(file, line, f"{where} is a JSON {found}, expected {wanted}")
    return value


_JSON_NAMES = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def arguments(value: Any) -> str:
    """A tool call's arguments as the JSON text OpenAI messages carry."""
    if isinstance(value, str):
        return value
    return json.dumps({} if value is None else value, ensure_ascii=False)


def call(call_id: str, name: str, args: Any) -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments(args)},
    }


def as_text(value: Any) -> str:
    """Tool output of any JSON shape as text (strings as they are, the rest as JSON)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=1)


def compact(
    session: ParsedSession,
    messages: list[ParsedMessage],
    compaction: NativeCompaction,
    replaced: list[ParsedMessage] | None = None,
) -> int:
    """Record ``compaction`` on the session and archive the rows it replaced (by default
    every active conversation row in ``messages`` so far); returns its index."""
    index = len(session.native_compactions)
    session.native_compactions.append(compaction)
    for message in messages if replaced is None else replaced:
        if message.active and not message.meta and message.replaced_by is None:
            message.active, message.archived = False, True
            message.replaced_by = index
    return index


def summary_row(text: str, index: int, extra: dict, created_at=None) -> ParsedMessage:
    """The user row holding an agent's own compaction summary, as the agent wrote it (a
    prompt we build wraps it in our prefix: ``Message.prompt_content``)."""
    return ParsedMessage(
        role="user",
        content=text,
        is_summary=True,
        summary_of=index,
        extra=extra,
        created_at=created_at,
    )


def clip_title(text: str) -> str:
    return " ".join(text.split())[:80]
