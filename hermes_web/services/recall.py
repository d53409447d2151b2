"""Recall: the full text behind a compaction's ``[ref:N]`` and a search over the chain's history.

A hermes compaction writes ``[ref:N]`` into every fold, stub and pointer, N being the index of
the message in that compaction's INPUT list (its active rows, by position, up to the run's
``snapshot_position``). Nothing is lost: those rows still exist.

- in place: the input rows are the session's rows archived by the run (``archived_by``);
- rotation: they are the parent session's active rows up to the snapshot (the parent ended
  and is never written again).

Several compactions of a chain each have their own N, so the producer of a reference is the
newest committed compaction whose report has an action at index N writing ``[ref:N]``; the
newest compaction is the fallback (a summary that cites a reference).
"""

from __future__ import annotations

from typing import Any

from compaction.messages import content_text
from hermes_web.models import Compaction, Message, Session

__all__ = ["producer_of", "recall_message", "recall_ref", "search_history"]

MAX_CHARS = 100_000
SEARCH_SCAN_ROWS = 20_000
SEARCH_LIMIT = 10


def _committed(session: Session):
    return Compaction.objects.for_lineage(session).committed().order_by("-finished_at", "-pk")


def producer_of(session: Session, ref: int) -> Compaction | None:
    """The committed compaction of the chain whose ``[ref:ref]`` this is (see module doc)."""
    newest = None
    marker = f"[ref:{ref}]"
    for run in _committed(session).only(
        "pk", "report", "mode", "status", "session_id", "snapshot_position"
    ):
        newest = newest or run
        for action in (run.report or {}).get("slimming") or ():
            if action.get("index") == ref and marker in str(
                action.get("line") or action.get("fold_line") or ""
            ):
                return run
    return newest


def _payload(row: Message, offset: int = 0, **extra: Any) -> dict[str, Any]:
    text = content_text(row.content)
    calls = row.tool_calls or None
    offset = max(0, int(offset or 0))
    shown = text[offset : offset + MAX_CHARS]
    payload: dict[str, Any] = {
        **extra,
        "message": row.pk,
        "role": row.role,
        "tool_name": row.tool_name or None,
        "content": shown,
        "total_chars": len(text),
        "offset": offset,
        "truncated": offset + len(shown) < len(text),
    }
    if calls:
        payload["tool_calls"] = calls
    return payload


def recall_ref(session: Session, ref: int, offset: int = 0) -> dict[str, Any]:
    """The full message behind ``[ref:ref]`` in this session's chain.

    Raises:
        LookupError: no compaction of the chain, or no input row ``ref``.
    """
    run = producer_of(session, ref)
    if run is None:
        raise LookupError("this conversation has no compaction yet, so there is nothing to recall")
    row = run.input_rows()[ref : ref + 1].first() if ref >= 0 else None
    if row is None:
        raise LookupError(f"compaction {run.public_id} had no message [ref:{ref}]")
    return _payload(row, offset, ref=ref, compaction=run.public_id)


def recall_message(session: Session, message_id: int, offset: int = 0) -> dict[str, Any]:
    """A stored message of this session's chain by its id (as ``search_history`` gives it)."""
    row = Message.objects.for_lineage(session).filter(pk=message_id).first()
    if row is None:
        raise LookupError(f"no message {message_id} in this conversation's history")
    return _payload(row, offset)


def search_history(session: Session, query: str, limit: int = SEARCH_LIMIT) -> dict[str, Any]:
    """Messages of the chain's whole history (archived and parent rows included) whose text
    contains ``query`` (case-insensitive), newest first, with a snippet around the hit."""
    needle = query.strip().lower()
    if not needle:
        raise LookupError("query is empty")
    rows = (
        Message.objects.for_lineage(session)
        .exclude(is_summary=True)
        .order_by("-created_at", "-pk")
        .values_list("pk", "role", "tool_name", "content")[:SEARCH_SCAN_ROWS]
    )
    matches: list[dict[str, Any]] = []
    seen: set[str] = set()
    for pk, role, tool_name, content in rows.iterator(chunk_size=500):
        text = content_text(content)
        at = text.lower().find(needle)
        if at == -1 or text in seen:
            continue
        seen.add(text)  # the same text archived and copied forward is one hit
        start = max(0, at - 120)
        matches.append(
            {
                "message": pk,
                "role": role,
                "tool_name": tool_name or None,
                "snippet": text[start : at + len(needle) + 200],
                "total_chars": len(text),
            }
        )
        if len(matches) >= limit:
            break
    return {"query": query, "matches": matches}
