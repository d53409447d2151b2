"""API routes for sessions: list, create, read, delete, and a rotation chain's tree."""

from __future__ import annotations

from django.db.models import Count, Q
from django.http import HttpRequest
from ninja import Query, Router, Status

from hermes_web.api.common import ERRORS, PageQuery, get_session, page_bounds
from hermes_web.models import Session
from hermes_web.schemas import ErrorOut, SessionDetailOut, SessionIn, SessionOut, SessionPage
from hermes_web.services.sessions import create_session, resolve_tip, session_tree

router = Router(tags=["sessions"])


@router.get("/sessions", response={200: SessionPage, 401: ErrorOut})
def list_sessions(request: HttpRequest, page: Query[PageQuery]) -> dict:
    """Your sessions, most recently updated first."""
    offset, limit = page_bounds(page)
    sessions = (
        Session.objects.for_user(request.user)
        .select_related("parent", "root")
        .annotate(active_count=Count("messages", filter=Q(messages__active=True)))
    )
    items = [SessionOut.from_session(s, s.active_count) for s in sessions[offset : offset + limit]]
    return {"count": sessions.count(), "items": items}


@router.post("/sessions", response={201: SessionOut, 401: ErrorOut, 422: ErrorOut})
def create(request: HttpRequest, data: SessionIn) -> Status:
    """Start an empty session."""
    session = create_session(
        owner=request.user,
        title=data.title,
        model=data.model,
        context_length=data.context_length,
        compaction_mode=data.compaction_mode,
    )
    return Status(201, SessionOut.from_session(session, 0))


@router.get("/sessions/{session_id}", response={200: SessionDetailOut, **ERRORS})
def session_detail(request: HttpRequest, session_id: str) -> dict:
    """One session; ``tip`` is where a rotated conversation continues."""
    session = get_session(request, session_id)
    return {
        **SessionOut.from_session(session),
        "tip": resolve_tip(session).public_id,
        "previous_summary": session.previous_summary,
        "import_report": (session.extra or {}).get("import_report"),
    }


@router.delete("/sessions/{session_id}", response={204: None, **ERRORS})
def delete_session(request: HttpRequest, session_id: str) -> Status:
    """Delete a session and its messages (rotation children are kept, unlinked)."""
    get_session(request, session_id).delete()
    return Status(204, None)


@router.get("/sessions/{session_id}/tree", response={200: list[SessionOut], **ERRORS})
def tree(request: HttpRequest, session_id: str) -> list[dict]:
    """Every session of the rotation chain, oldest first."""
    return [SessionOut.from_session(s) for s in session_tree(get_session(request, session_id))]
