"""API routes for import (an uploaded file) and export (a session, a compaction report)."""

from __future__ import annotations

from collections.abc import Iterator

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja import File, Form, Router, Status
from ninja.files import UploadedFile

from hermes_web import exporters
from hermes_web.api.common import ERRORS, get_compaction, get_session
from hermes_web.api.errors import TooLarge, Unprocessable
from hermes_web.importers import FORMATS as IMPORT_FORMATS
from hermes_web.importers import import_upload
from hermes_web.schemas import ErrorOut, ImportFailedOut, ImportOut
from hermes_web.services.sessions import max_upload_bytes

router = Router(tags=["import/export"])


@router.post(
    "/import",
    response={200: ImportOut, 400: ImportFailedOut, 401: ErrorOut, 413: ErrorOut, 422: ErrorOut},
)
def import_file(
    request: HttpRequest,
    file: File[UploadedFile],
    format: Form[str] = "auto",
    skip_existing: Form[bool] = False,
) -> dict | Status:
    """Upload a Hermes JSONL/JSON export, transcript or state.db, OpenAI JSON, Claude Code or
    Codex transcript, or a ``.zip`` / ``.tar.gz`` of such files and Claude Code session
    folders (format auto; sub-agents linked as children, tool-results files joined).
    Sessions imported before are ``duplicates`` (400 when nothing else was imported) unless
    ``skip_existing``; each imported session has a fidelity report."""
    if format != "auto" and format not in IMPORT_FORMATS:
        raise Unprocessable(f"format must be auto or one of {', '.join(IMPORT_FORMATS)}")
    if (file.size or 0) > max_upload_bytes():
        raise TooLarge(f"file is larger than {max_upload_bytes() // 2**20} MB")
    report = import_upload(file, owner=request.user, fmt=format, skip_existing=skip_existing)
    body = report.to_dict()
    if report.refused and not report.sessions and not report.skipped:
        return Status(400, {**body, "detail": str(report.refused[0])})
    return body


def _download(
    text: str | Iterator[str], fmt: str, stem: str
) -> HttpResponse | StreamingHttpResponse:
    # A session export is an iterator of chunks: streamed, never held whole in memory.
    response: HttpResponse | StreamingHttpResponse
    if isinstance(text, str):
        response = HttpResponse(text, content_type=exporters.CONTENT_TYPES[fmt])
    else:
        response = StreamingHttpResponse(text, content_type=exporters.CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{stem}.{exporters.EXTENSIONS[fmt]}"'
    return response


@router.get("/sessions/{session_id}/export", response={200: None, 422: ErrorOut, **ERRORS})
def export_session(
    request: HttpRequest, session_id: str, format: str = "openai"
) -> HttpResponse | StreamingHttpResponse:
    """``openai``: the active messages as a JSON list; ``hermes-jsonl``: one Hermes session line."""
    session = get_session(request, session_id)
    if format not in exporters.SESSION_FORMATS:
        raise Unprocessable(f"format must be one of {', '.join(exporters.SESSION_FORMATS)}")
    return _download(exporters.iter_session_export(session, format), format, session.public_id)


@router.get("/compactions/{compaction_id}/export", response={200: None, 422: ErrorOut, **ERRORS})
def export_report(
    request: HttpRequest, compaction_id: str, format: str = "report-json"
) -> HttpResponse | StreamingHttpResponse:
    """The compaction report as JSON or Markdown."""
    c = get_compaction(request, compaction_id)
    if format not in exporters.REPORT_FORMATS:
        raise Unprocessable(f"format must be one of {', '.join(exporters.REPORT_FORMATS)}")
    return _download(exporters.export_report_text(c, format), format, f"compaction-{c.public_id}")
