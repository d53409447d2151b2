"""API routes for a session's messages: read a page, append one."""

from __future__ import annotations

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Status

from hermes_web import caching, validation
from hermes_web.api.common import ERRORS, PageQuery, get_session, get_session_key, page_bounds
from hermes_web.api.errors import Conflict, Unprocessable
from hermes_web.caching import MESSAGE_PAGE_SECONDS, message_page_key
from hermes_web.models import Message
from hermes_web.schemas import ErrorOut, MessageIn, MessageOut, MessagePage
from hermes_web.services.sessions import append_message, conversation_stats, resolve_tip

router = Router(tags=["messages"])


class MessageQuery(PageQuery):
    include_archived: bool = False


@router.get("/sessions/{session_id}/messages", response={200: MessagePage, **ERRORS})
def list_messages(request: HttpRequest, session_id: str, page: Query[MessageQuery]) -> HttpResponse:
    """Messages in order: the active conversation, or the full history with include_archived."""
    session = get_session_key(request, session_id)
    offset, limit = page_bounds(page)
    # The page's JSON is kept until the session is touched (every writer of its rows does),
    # so a client polling an unchanged conversation costs no query and no serialization.
    key = message_page_key(session, offset, limit, page.include_archived)
    from hermes_web.api import api  # the package imports this module to mount its router

    body = cache.get(key)
    if body is None:
        listing = _message_page(session, offset, limit, page.include_archived)
        # Rendered as ninja renders a returned MessagePage (the same dump and encoder).
        body = api.renderer.render(request, listing.model_dump(), response_status=200)
        if len(body) <= caching.MESSAGE_PAGE_MAX_BYTES:
            cache.set(key, body, MESSAGE_PAGE_SECONDS)
    return HttpResponse(body, content_type=api.get_content_type())


def _message_page(session, offset: int, limit: int, include_archived: bool) -> MessagePage:
    rows = Message.objects.filter(session=session).order_by("position")
    if include_archived:
        count = rows.count()
    else:
        rows = rows.filter(active=True)
        count = conversation_stats(session)["n"] or 0  # cached until the session changes
    return MessagePage.model_validate(
        {
            "count": count,
            # Rows as dicts: model instances for a page of large messages cost more than the
            # query.
            "items": [
                MessageOut.from_row(r)
                for r in rows.values(*MessageOut.COLUMNS)[offset : offset + limit]
            ],
        }
    )


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
