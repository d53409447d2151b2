"""Request checks that apply to every route.

Request-size limit: a body larger than the upload limit is refused before it is read, and
so is any body that is not an upload (JSON, forms) over ``DATA_UPLOAD_MAX_MEMORY_SIZE``
(10 MB), which Django would otherwise answer with a bare HTML "Bad Request" on reading it.

Django reads a request's body lazily (the CSRF check reads the form, an upload view reads
``request.FILES``); this middleware runs first and answers 413 from the ``Content-Length``
header alone, so an oversized upload is never streamed to a temporary file or into memory.
A body without a length (chunked) is not read by Django's WSGI handler at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from hermes_web.importers.limits import import_paths

# The longest header value a request may carry: gunicorn's own default field limit (8190
# bytes with the name), kept by this middleware now that gunicorn lets up to 64 KiB through.
MAX_HEADER_CHARS = 8190
# Multipart framing (boundaries, part headers, the CSRF field) on top of the file itself.
ENVELOPE_BYTES = 64 * 1024
FORM = "application/x-www-form-urlencoded"
log = logging.getLogger(__name__)


def max_request_bytes() -> int:
    """The largest request body accepted: the upload limit plus multipart framing."""
    return settings.HERMES_MAX_UPLOAD_BYTES + ENVELOPE_BYTES


class RequestSizeLimitMiddleware:
    """Answer 413 to any request whose declared body exceeds ``max_request_bytes()``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        for name, value in request.META.items():
            # gunicorn lets headers up to 64 KiB through (Procfile) so that this answers in
            # the route's shape (JSON on /v1 and /api) instead of gunicorn's HTML 431.
            if name.startswith("HTTP_") and len(value) > MAX_HEADER_CHARS:
                header = name[5:].replace("_", "-").title()
                return refusal(
                    request,
                    f"the {header} header is {len(value):,} characters long; at most "
                    f"{MAX_HEADER_CHARS:,} are accepted",
                    431,
                    code="request_header_fields_too_large",
                )
        if request.path in import_paths():
            # The import routes answer in their own words (the page as an htmx partial, the
            # API as JSON) from the same Content-Length check, in ImportUploadLimitMiddleware.
            return self.get_response(request)
        raw = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw)
        except ValueError:
            return refusal(request, f"invalid Content-Length {raw[:40]!r}", 400)
        limit = max_request_bytes()
        if length > limit:
            mb = settings.HERMES_MAX_UPLOAD_BYTES // 2**20
            return refusal(
                request,
                f"request body of {length:,} bytes is larger than the {mb} MB upload limit "
                "(HERMES_MAX_UPLOAD_BYTES)",
                413,
            )
        in_memory = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        multipart = request.META.get("CONTENT_TYPE", "").startswith("multipart/")
        if in_memory is not None and length > in_memory and not multipart:
            return refusal(
                request,
                f"request body of {length:,} bytes is larger than the "
                f"{in_memory // 2**20} MB a JSON or form body may have",
                413,
            )
        return self.get_response(request)


def refusal(
    request: HttpRequest, detail: str, status: int, code: str = "request_too_large"
) -> HttpResponse:
    """A refusal in the shape of the route asked for: the protocol's JSON error on /v1 (an
    Anthropic one under /v1/messages), ``{"detail"}`` on /api or to a JSON client, else text."""
    if request.path.startswith("/v1/") or request.path == "/v1":
        from hermes_web.openai_compat.errors import ApiError

        shape = "anthropic" if request.path.startswith("/v1/messages") else "openai"
        kind = "server_error" if status >= 500 else "invalid_request_error"
        return ApiError(status, detail, type=kind, code=code).response(shape)
    if request.path.startswith("/api/") or "json" in request.META.get("HTTP_ACCEPT", ""):
        return JsonResponse({"detail": detail}, status=status)
    return HttpResponse(detail, status=status, content_type="text/plain; charset=utf-8")


class RefuseNulMiddleware:
    """Answer 400 to a NUL character (U+0000) in the path, the query or a form field.

    No value of this app can hold one, and PostgreSQL refuses it in any text it is handed (a
    lookup by ``/api/sessions/%00`` or a chat message with a NUL failed with a 500). Only
    url-encoded forms are read here: multipart uploads keep their own handlers and checks.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = self._nul_in(request)
        if where:
            return refusal(
                request,
                f"The request's {where} contains a NUL character (U+0000); nothing was done.",
                400,
                code="invalid_request",
            )
        return self.get_response(request)

    @staticmethod
    def _nul_in(request: HttpRequest) -> str:
        if "\x00" in request.path:
            return "path"
        for key, values in request.GET.lists():
            if "\x00" in key or any("\x00" in v for v in values):
                return f"query parameter {key.replace(chr(0), '')!r}"
        if request.method == "POST" and request.content_type == FORM:
            for key, values in request.POST.lists():
                if "\x00" in key or any("\x00" in v for v in values):
                    return f"form field {key.replace(chr(0), '')!r}"
        return ""


BUSY_RETRY_SECONDS = 5


def is_database_busy(error: BaseException) -> bool:
    """SQLite's "database is locked" / "database table is locked" / busy, as Django raises it
    (``OperationalError``) once its busy timeout ran out behind another writer."""
    if not isinstance(error, OperationalError):
        return False
    text = str(error).lower()
    return "is locked" in text or "database is busy" in text


def busy_response(request: HttpRequest) -> HttpResponse:
    """503 with ``Retry-After`` in the door's shape: the protocol's JSON error on ``/v1``,
    ``{"detail"}`` on ``/api``, a page on the site. Nothing of the request was stored: the
    transaction that met the lock was rolled back."""
    detail = (
        "The database is busy with another write (a large import, most likely); nothing was "
        f"stored. Try again in {BUSY_RETRY_SECONDS} seconds."
    )
    response: HttpResponse
    if request.path.startswith("/v1/"):
        from hermes_web.openai_compat.errors import ApiError

        shape = "anthropic" if request.path.startswith("/v1/messages") else "openai"
        response = ApiError(503, detail, type="server_error", code="database_busy").response(shape)
    elif request.path.startswith("/api/") or "json" in request.META.get("HTTP_ACCEPT", ""):
        response = JsonResponse({"detail": detail}, status=503)
    else:
        response = render(request, "503.html", {"detail": detail}, status=503)
    response["Retry-After"] = str(BUSY_RETRY_SECONDS)
    return response


class DatabaseBusyMiddleware:
    """A request whose write met a locked database (SQLite's busy timeout ran out behind a
    long write) is answered 503 with ``Retry-After`` instead of an HTML 500."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, error: Exception) -> HttpResponse | None:
        if not is_database_busy(error):
            return None
        log.warning("%s %s: %s; answered 503", request.method, request.path, error)
        return busy_response(request)
