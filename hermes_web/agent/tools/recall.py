"""The ``recall`` tool: a folded or summarized tool output from earlier in the conversation,
by its ``[ref:N]`` or by searching the session's history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes_web.agent.tools.workspace import ToolError, _ok


def recall(
    root: Path,
    ref: int | str | None = None,
    query: str = "",
    message: int | None = None,
    offset: int = 0,
    *,
    session: Any = None,
) -> str:
    """The full text of a message a compaction folded, demoted or summarized.

    ``ref`` is the number of a ``[ref:N]`` written into a fold, stub or summary; ``query``
    searches the whole history of the conversation (archived rows included) and gives
    message ids; ``message`` fetches one of those. ``offset`` pages through a long text.
    """
    from hermes_web.services import recall as service

    if session is None:
        raise ToolError("recall needs a conversation")
    try:
        if ref is not None and str(ref).strip() != "":
            number = int(str(ref).strip().removeprefix("[ref:").removesuffix("]"))
            return _ok(service.recall_ref(session, number, int(offset or 0)))
        if message is not None:
            return _ok(service.recall_message(session, int(message), int(offset or 0)))
        if query:
            return _ok(service.search_history(session, str(query)))
    except LookupError as exc:
        raise ToolError(str(exc)) from None
    raise ToolError("give ref (the N of [ref:N]), or query to search, or message from a search")
