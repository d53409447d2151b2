"""API routes for a session's messages: read a page, append one."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router, Status

from hermes_web import validation
from hermes_web.api.common import ERRORS, PageQuery, get_session, get_session_key, page_bounds
from hermes_web.api.errors import Conflict, Unprocessable
from hermes_web.models import Message
from hermes_web.schemas import ErrorOut, MessageIn, MessageOut, MessagePage
from hermes_web.services.sessions import append_message, conversation_stats, resolve_tip

router = Router(tags=["messages"])


class MessageQuery(PageQuery):
    include_archived: bool = False


@router.get("/sessions/{session_id}/messages", response={200: MessagePage, **ERRORS})
def list_messages(request: HttpRequest, session_id: str, page: Query[MessageQuery]) -> dict:
    """Messages in order: the active conversation, or the full history with include_archived."""
    session = get_session_key(request, session_id)
    offset, limit = page_bounds(page)
    rows = Message.objects.filter(session=session).order_by("position")
    count: int | None
    if page.include_archived:
        count = rows.count()
    else:
        rows = rows.filter(active=True)
        count = conversation_stats(session)["n"]  # cached until the session changes
    return {
        "count": count,
        # Rows as dicts: model instances for a page of large messages cost more than the query.
        "items": [
            MessageOut.from_row(r)
            for r in rows.values(*MessageOut.COLUMNS)[offset : offset + limit]
        ],
    }


@router.post(
    "/sessions/{session_id}/messages",
    response={201: MessageOut, 409: ErrorOut, 422: ErrorOut, **ERRORS},
)
def post_message(request: HttpRequest, session_id: str, data: MessageIn) -> Status:
    """Append a message (no model call; use the chat endpoints for a reply)."""
    session = get_session(request, session_id)
    if session.is_rotated:
        raise Conflict(
            f"session {session.public_id} was compacted by rotation; "
            f"append to {resolve_tip(session).public_id}"
        )
    if data.role == "tool" and not data.tool_call_id:
        raise Unprocessable("a tool message needs tool_call_id")
    # The whole message through the importers' validator too (the schema checks each field
    # alone): a user message with tool calls would make the OpenAI export invalid.
    try:
        validation.check_message(
            role=data.role,
            content=data.content,
            tool_calls=data.tool_calls,
            tool_call_id=data.tool_call_id,
            tool_name=data.name,
            reasoning=data.reasoning,
        )
    except validation.Invalid as error:
        raise Unprocessable(str(error)) from None
    message = append_message(
        session,
        role=data.role,
        content=data.content,
        tool_calls=data.tool_calls,
        tool_call_id=data.tool_call_id,
        tool_name=data.name,
        reasoning=data.reasoning,
    )
    return Status(201, MessageOut.from_message(message))
