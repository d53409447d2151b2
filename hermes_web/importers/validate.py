"""Every parsed message checked before storing, by the one validator (``hermes_web.validation``).

This module only adapts it to the importers: a ``ParsedMessage`` is checked field by field,
and the first problem of a session becomes an ``ImportProblem`` naming the file, the line
and the message number. The validator's names stay importable from here.
"""

from __future__ import annotations

from hermes_web.importers.base import ImportProblem, ParsedMessage, ParsedSession
from hermes_web.validation import Invalid, check_content, check_text, check_tool_calls
from hermes_web.validation import check_message as check_fields

__all__ = [
    "Invalid",
    "check_content",
    "check_message",
    "check_parsed",
    "check_text",
    "check_tool_calls",
]


def check_message(message: ParsedMessage) -> None:
    """Raise ``Invalid`` naming what is wrong with one parsed message."""
    check_fields(
        role=message.role,
        content=message.content,
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
        tool_name=message.tool_name,
        reasoning=message.reasoning,
        extra=message.extra,
    )


def check_parsed(parsed: ParsedSession, file: str) -> None:
    """Raise an ImportProblem naming the first invalid message of the session."""
    for number, message in enumerate(parsed.messages, 1):
        try:
            check_message(message)
        except Invalid as error:
            line = message.extra.get("line") if isinstance(message.extra, dict) else None
            raise ImportProblem(
                file,
                line if isinstance(line, int) else parsed.line,
                f"message {number}: {error}",
                parsed.public_id,
            ) from None
    try:
        check_text(parsed.title, "title")
        check_text(parsed.public_id, "session id")
        check_text(parsed.extra, "session metadata")
    except Invalid as error:
        raise ImportProblem(file, parsed.line, str(error), "") from None
