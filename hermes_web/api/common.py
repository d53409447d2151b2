"""What every router shares: the lookups scoped to ``request.user``, paging, error statuses.

Every lookup starts from ``request.user`` (cookie session or API key), so another user's
ids answer 404 exactly like ids that do not exist.
"""

from __future__ import annotations

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, Schema

from hermes_web.models import Compaction, Session
from hermes_web.schemas import ErrorOut

# The statuses every route that looks something up can answer.
ERRORS = {401: ErrorOut, 404: ErrorOut}


def get_session(request: HttpRequest, public_id: str) -> Session:
    return get_object_or_404(
        Session.objects.for_user(request.user).select_related("parent", "root"), public_id=public_id
    )


def get_session_key(request: HttpRequest, public_id: str) -> Session:
    """The session's id and ``updated_at`` only: for routes that read its messages, where
    loading the full row and its parent and root cost more than the page of messages."""
    return get_object_or_404(
        Session.objects.for_user(request.user).only("pk", "updated_at"), public_id=public_id
    )


def get_compaction(request: HttpRequest, public_id: str) -> Compaction:
    return get_object_or_404(
        Compaction.objects.for_user(request.user).select_related("session", "result_session"),
        public_id=public_id,
    )


class PageQuery(Schema):
    # Bounded so a huge value is a 422 naming the field, not an integer SQLite cannot bind.
    limit: int = Field(50, ge=-(10**9), le=10**9)
    offset: int = Field(0, ge=-(10**9), le=10**9)


def page_bounds(query: PageQuery) -> tuple[int, int]:
    """``(offset, limit)`` clamped: offset ≥ 0, 1 ≤ limit ≤ 500."""
    return max(0, query.offset), min(max(1, query.limit), 500)
