"""API routes for sessions, messages, compactions, import and export.

Every lookup starts from ``request.user`` (cookie session or API key), so another user's
ids answer 404 exactly like ids that do not exist.
"""

from django.db.models import Count, Q
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from ninja import Field, File, Form, Query, Router, Schema, Status
from ninja.files import UploadedFile
from ninja.security import HttpBearer

from compaction import ConfigError
from hermes_web import exporters
from hermes_web.auth import authenticate_api_key
from hermes_web.importers import FORMATS as IMPORT_FORMATS
from hermes_web.importers import import_upload
from hermes_web.models import Compaction, Message, Session
from hermes_web.schemas import (
    CompactionDetailOut,
    CompactionIn,
    CompactionOut,
    ErrorOut,
    ImportFailedOut,
    ImportOut,
    MessageIn,
    MessageOut,
    MessagePage,
    SessionDetailOut,
    SessionIn,
    SessionOut,
    SessionPage,
)
from hermes_web.services.compactions import (
    CompactionRefused,
    commit_what_if,
    in_progress,
    request_compaction,
)
from hermes_web.services.sessions import (
    append_message,
    conversation_stats,
    create_session,
    max_upload_bytes,
    resolve_tip,
    session_tree,
)

router = Router()
ERRORS = {401: ErrorOut, 404: ErrorOut}


class ApiKeyAuth(HttpBearer):
    """``Authorization: Bearer hk_…``: a usable key of an active user."""

    def authenticate(self, request, token: str):
        key = authenticate_api_key(token)
        if key is not None:
            request.user = key.owner
        return key


def _session(request, public_id: str) -> Session:
    return get_object_or_404(
        Session.objects.for_user(request.user).select_related("parent", "root"), public_id=public_id
    )


def _session_key(request, public_id: str) -> Session:
    """The session's id and ``updated_at`` only: for routes that read its messages, where
    loading the full row and its parent and root cost more than the page of messages."""
    return get_object_or_404(
        Session.objects.for_user(request.user).only("pk", "updated_at"), public_id=public_id
    )


def _compaction(request, public_id: str) -> Compaction:
    return get_object_or_404(
        Compaction.objects.for_user(request.user).select_related("session", "result_session"),
        public_id=public_id,
    )


class PageQuery(Schema):
    # Bounded so a huge value is a 422 naming the field, not an integer SQLite cannot bind.
    limit: int = Field(50, ge=-(10**9), le=10**9)
    offset: int = Field(0, ge=-(10**9), le=10**9)


def _page(query: PageQuery) -> tuple[int, int]:
    return max(0, query.offset), min(max(1, query.limit), 500)


# --- sessions --------------------------------------------------------------------------


@router.get("/sessions", response={200: SessionPage, 401: ErrorOut}, tags=["sessions"])
def list_sessions(request, page: Query[PageQuery]):
    """Your sessions, most recently updated first."""
    offset, limit = _page(page)
    sessions = (
        Session.objects.for_user(request.user)
        .select_related("parent", "root")
        .annotate(active_count=Count("messages", filter=Q(messages__active=True)))
    )
    items = [SessionOut.from_session(s, s.active_count) for s in sessions[offset : offset + limit]]
    return {"count": sessions.count(), "items": items}


@router.post(
    "/sessions", response={201: SessionOut, 401: ErrorOut, 422: ErrorOut}, tags=["sessions"]
)
def create(request, data: SessionIn):
    """Start an empty session."""
    session = create_session(
        owner=request.user,
        title=data.title,
        model=data.model,
        context_length=data.context_length,
        compaction_mode=data.compaction_mode,
    )
    return Status(201, SessionOut.from_session(session, 0))


def _detail(session: Session) -> dict:
    return {
        **SessionOut.from_session(session),
        "tip": resolve_tip(session).public_id,
        "previous_summary": session.previous_summary,
    }


@router.get("/sessions/{session_id}", response={200: SessionDetailOut, **ERRORS}, tags=["sessions"])
def session_detail(request, session_id: str):
    """One session; ``tip`` is where a rotated conversation continues."""
    return _detail(_session(request, session_id))


@router.delete("/sessions/{session_id}", response={204: None, **ERRORS}, tags=["sessions"])
def delete_session(request, session_id: str):
    """Delete a session and its messages (rotation children are kept, unlinked)."""
    _session(request, session_id).delete()
    return Status(204, None)


@router.get(
    "/sessions/{session_id}/tree", response={200: list[SessionOut], **ERRORS}, tags=["sessions"]
)
def tree(request, session_id: str):
    """Every session of the rotation chain, oldest first."""
    return [SessionOut.from_session(s) for s in session_tree(_session(request, session_id))]


# --- messages --------------------------------------------------------------------------


class MessageQuery(PageQuery):
    include_archived: bool = False


@router.get(
    "/sessions/{session_id}/messages", response={200: MessagePage, **ERRORS}, tags=["messages"]
)
def list_messages(request, session_id: str, page: Query[MessageQuery]):
    """Messages in order: the active conversation, or the full history with include_archived."""
    session = _session_key(request, session_id)
    offset, limit = _page(page)
    rows = Message.objects.filter(session=session).order_by("position")
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
    tags=["messages"],
)
def post_message(request, session_id: str, data: MessageIn):
    """Append a message (no model call; use the chat endpoints for a reply)."""
    session = _session(request, session_id)
    if session.is_rotated:
        tip = resolve_tip(session)
        return Status(
            409,
            {
                "detail": f"session {session.public_id} was compacted by rotation; "
                f"append to {tip.public_id}"
            },
        )
    if data.role == "tool" and not data.tool_call_id:
        return Status(422, {"detail": "a tool message needs tool_call_id"})
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


# --- compactions -----------------------------------------------------------------------


def _start(request, session: Session, data: CompactionIn, trigger: str):
    if trigger != Compaction.Trigger.WHAT_IF and (running := in_progress(session)) is not None:
        return Status(
            409,
            {
                "detail": f"compaction {running.public_id} is already {running.status} for this session"
            },
        )
    try:
        run = request_compaction(
            session=session,
            requested_by=request.user,
            trigger=trigger,
            mode=data.mode,
            focus=data.focus,
            config_overrides=data.config,
            summarizer=data.summarizer,
        )
    except ConfigError as error:
        return Status(422, {"detail": f"config: {error}"})
    except CompactionRefused as error:
        return Status(409, {"detail": f"{error} ({resolve_tip(session).public_id})"})
    except ValueError as error:
        return Status(422, {"detail": str(error)})
    return Status(202, CompactionOut.from_compaction(run))


START = {202: CompactionOut, 409: ErrorOut, 422: ErrorOut, **ERRORS}


@router.post("/sessions/{session_id}/compactions", response=START, tags=["compactions"])
def compact(request, session_id: str, data: CompactionIn):
    """Queue a manual compaction; poll GET /compactions/{id} for its status and report."""
    return _start(request, _session(request, session_id), data, Compaction.Trigger.MANUAL)


@router.post("/sessions/{session_id}/what-if", response=START, tags=["compactions"])
def what_if(request, session_id: str, data: CompactionIn):
    """Queue a dry run: the report is stored, nothing is committed."""
    return _start(request, _session(request, session_id), data, Compaction.Trigger.WHAT_IF)


@router.get(
    "/sessions/{session_id}/compactions",
    response={200: list[CompactionOut], **ERRORS},
    tags=["compactions"],
)
def session_compactions(request, session_id: str):
    """This session's compaction runs, newest first."""
    session = _session(request, session_id)
    rows = Compaction.objects.filter(session=session).select_related("session", "result_session")[
        :200
    ]
    return [CompactionOut.from_compaction(c) for c in rows]


@router.get(
    "/compactions/{compaction_id}",
    response={200: CompactionDetailOut, **ERRORS},
    tags=["compactions"],
)
def compaction_detail(request, compaction_id: str):
    """Status, tokens, and the engine's full report once finished."""
    c = _compaction(request, compaction_id)
    return {**CompactionOut.from_compaction(c), "config": c.config, "report": c.report}


@router.post("/compactions/{compaction_id}/commit", response=START, tags=["compactions"])
def commit(request, compaction_id: str):
    """Run a finished dry run for real (same config, mode and focus)."""
    dry = _compaction(request, compaction_id)
    if dry.status != Compaction.Status.DRY_RUN:
        return Status(
            409, {"detail": f"only a finished dry run can be committed; this one is {dry.status}"}
        )
    if (running := in_progress(dry.session)) is not None:
        return Status(
            409,
            {
                "detail": f"compaction {running.public_id} is already {running.status} for this session"
            },
        )
    try:
        run = commit_what_if(dry, requested_by=request.user)
    except CompactionRefused as error:
        return Status(409, {"detail": str(error)})
    return Status(202, CompactionOut.from_compaction(run))


# --- import / export -------------------------------------------------------------------


@router.post(
    "/import",
    response={200: ImportOut, 400: ImportFailedOut, 401: ErrorOut, 413: ErrorOut, 422: ErrorOut},
    tags=["import/export"],
)
def import_file(
    request,
    file: File[UploadedFile],
    format: Form[str] = "auto",
    skip_existing: Form[bool] = False,
):
    """Upload a Hermes JSONL/JSON export, transcript or state.db, OpenAI JSON, Claude Code or
    Codex transcript. Sessions imported before are ``duplicates`` (400 when nothing else
    was imported) unless ``skip_existing``; each imported session has a fidelity report."""
    if format != "auto" and format not in IMPORT_FORMATS:
        return Status(422, {"detail": f"format must be auto or one of {', '.join(IMPORT_FORMATS)}"})
    if file.size > max_upload_bytes():
        return Status(413, {"detail": f"file is larger than {max_upload_bytes() // 2**20} MB"})
    report = import_upload(file, owner=request.user, fmt=format, skip_existing=skip_existing)
    body = report.to_dict()
    if report.refused and not report.sessions and not report.skipped:
        return Status(400, {**body, "detail": str(report.refused[0])})
    return body


def _download(text, fmt: str, stem: str) -> HttpResponse:
    # A session export is an iterator of chunks: streamed, never held whole in memory.
    if isinstance(text, str):
        response = HttpResponse(text, content_type=exporters.CONTENT_TYPES[fmt])
    else:
        response = StreamingHttpResponse(text, content_type=exporters.CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{stem}.{exporters.EXTENSIONS[fmt]}"'
    return response


@router.get(
    "/sessions/{session_id}/export",
    response={200: None, 422: ErrorOut, **ERRORS},
    tags=["import/export"],
)
def export_session(request, session_id: str, format: str = "openai"):
    """``openai``: the active messages as a JSON list; ``hermes-jsonl``: one Hermes session line."""
    session = _session(request, session_id)
    if format not in exporters.SESSION_FORMATS:
        return Status(
            422, {"detail": f"format must be one of {', '.join(exporters.SESSION_FORMATS)}"}
        )
    return _download(exporters.iter_session_export(session, format), format, session.public_id)


@router.get(
    "/compactions/{compaction_id}/export",
    response={200: None, 422: ErrorOut, **ERRORS},
    tags=["import/export"],
)
def export_report(request, compaction_id: str, format: str = "report-json"):
    """The compaction report as JSON or Markdown."""
    c = _compaction(request, compaction_id)
    if format not in exporters.REPORT_FORMATS:
        return Status(
            422, {"detail": f"format must be one of {', '.join(exporters.REPORT_FORMATS)}"}
        )
    return _download(exporters.export_report_text(c, format), format, f"compaction-{c.public_id}")
