"""Bounds of what an import stores and reports: the stored size of a message and a session
(every field counts, metadata included) and the capped problem lists of a report.

Apart from ``limits`` (the upload middleware, which answers through the import page's view),
so the importers can use them without importing a view.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

# An import report lists at most this many problems of each kind; the rest are counted. A
# 0.8 MB file of 200,000 broken lines gave a 21 MB page and a 51 MB API answer.
PROBLEMS_SHOWN = 100


class ProblemList(list):
    """A report's list of problems: keeps the first ``PROBLEMS_SHOWN``, counts the others.

    ``len()`` and iteration see the kept ones; ``left_off`` is how many more there were and
    ``total`` all of them, which is what counts of failures must use.
    """

    def __init__(self) -> None:
        super().__init__()
        self.left_off = 0

    def append(self, problem: object) -> None:
        if len(self) < PROBLEMS_SHOWN:
            super().append(problem)
        else:
            self.left_off += 1

    def __iadd__(self, other):  # type: ignore[override,misc]  # one report's list into another's
        for problem in other:
            self.append(problem)
        self.left_off += getattr(other, "left_off", 0)
        return self

    @property
    def total(self) -> int:
        return len(self) + self.left_off


# -- stored size of an imported message and session ---------------------------------------------


def json_size(value: Any) -> int:
    """Characters ``value`` takes stored as JSON (0 for None, the length of a string)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False, default=str))


def message_size(message: Any) -> int:
    """Everything a parsed message stores: content, tool calls, ids, reasoning and metadata
    (``extra``, where a Hermes database's extra columns land). Counting only the content let
    a 16 KB state.db with a generated 40 MB column store 200 MB."""
    return (
        json_size(message.content)
        + json_size(message.tool_calls)
        + len(message.tool_call_id or "")
        + len(message.tool_name or "")
        + json_size(message.reasoning)
        + json_size(message.extra)
    )


def session_metadata_size(parsed: Any) -> int:
    """What a parsed session stores besides its messages: title, model and metadata."""
    return len(parsed.title or "") + len(parsed.model or "") + json_size(parsed.extra)


def max_message_bytes() -> int:
    return settings.HERMES_MAX_MESSAGE_BYTES


def max_session_bytes() -> int:
    return settings.HERMES_MAX_SESSION_BYTES
