"""API route for search over everything the signed-in user stored (``services.search``)."""

from __future__ import annotations

import datetime as dt

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from hermes_web.api.errors import ApiRefusal
from hermes_web.schemas import ErrorOut
from hermes_web.services.search import SearchError, parse_query, search

router = Router(tags=["search"])


class SearchParams(Schema):
    q: str = Field("", description='Words, "exact phrases", prefix*; matched as substrings')
    kind: list[str] = Field(
        [], description="message, tool_call, tool_result, summary, ledger, native_summary"
    )
    role: list[str] = Field([], description="system, user, assistant, tool")
    source: list[str] = Field([], description="the conversation's source (chat, api, import:…)")
    conversation: str = Field(
        "", description="a conversation's public id: its whole rotation chain"
    )
    since: str = Field("", description="YYYY-MM-DD, inclusive")
    until: str = Field("", description="YYYY-MM-DD, inclusive")
    limit: int = Field(20, ge=1, le=100)
    offset: int = Field(0, ge=0, le=10**6)


class HitOut(Schema):
    kind: str
    conversation: str
    conversation_title: str
    source: str
    position: int | None = Field(description="the message's position; null for a compaction's text")
    role: str
    compaction: str | None = Field(
        description="the compaction's public id for its summary or ledger"
    )
    snippet: str
    snippet_html: str = Field(description="escaped HTML, the matches in <mark>")
    created_at: dt.datetime | None
    url: str


class SearchPage(Schema):
    count: int
    count_exact: bool = Field(description="false when there are more hits than count")
    offset: int
    limit: int
    next_offset: int | None
    partial: bool = Field(description="only the newest messages were searched (short terms)")
    notes: list[str]
    items: list[HitOut]


class BadQuery(ApiRefusal):
    """400: a query or filter that cannot be searched."""

    status = 400


@router.get("/search", response={200: SearchPage, 400: ErrorOut, 401: ErrorOut})
def search_everything(request: HttpRequest, params: Query[SearchParams]) -> dict:
    """Search your messages, tool calls, tool results, summaries and fact ledgers; newest first."""
    try:
        query = parse_query(
            params.q,
            kinds=params.kind,
            roles=params.role,
            sources=params.source,
            conversation=params.conversation,
            since=params.since,
            until=params.until,
        )
        result = search(request.user, query, offset=params.offset, limit=params.limit)
    except SearchError as error:
        raise BadQuery(str(error)) from None
    return {
        "count": result.count,
        "count_exact": result.count_exact,
        "offset": result.offset,
        "limit": result.limit,
        "next_offset": result.next_offset,
        "partial": result.partial,
        "notes": result.notes,
        "items": [hit.__dict__ for hit in result.hits],
    }
