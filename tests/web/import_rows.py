"""Everything an import stored, as plain data: the session's fields and every message row
(what two importer versions must agree on)."""

from __future__ import annotations

from typing import Any

from hermes_web.models import Message, Session

_SESSION_FIELDS = (
    "title",
    "source",
    "model",
    "context_length",
    "created_at",
    "ended_at",
    "end_reason",
    "previous_summary",
    "extra",
)
_MESSAGE_FIELDS = (
    "position",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "reasoning",
    "token_count",
    "active",
    "archived",
    "is_summary",
    "extra",
    "created_at",
)


def stored_rows(session: Session) -> dict[str, Any]:
    """The session (its owner-namespaced id without the owner) and its rows, JSON-ready."""
    session = Session.objects.get(pk=session.pk)
    data: dict[str, Any] = {
        "public_id": session.public_id.rsplit(".", 1)[0],
        "parent": session.parent.public_id.rsplit(".", 1)[0] if session.parent else None,
    }
    for name in _SESSION_FIELDS:
        value = getattr(session, name)
        data[name] = value.isoformat() if hasattr(value, "isoformat") else value
    rows = Message.objects.filter(session=session).order_by("position")
    data["messages"] = [
        [_plain(value) for value in row] for row in rows.values_list(*_MESSAGE_FIELDS)
    ]
    return data


def _plain(value: Any) -> Any:
    """JSON-ready; a summary row's ``native_compaction`` (the random public id of the agent's
    compaction it summarizes, checked in test_native_compactions) is left out."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, dict) and "native_compaction" in value:
        return {k: v for k, v in value.items() if k != "native_compaction"}
    return value
