"""Uploads to the import endpoints refused by size before their body is stored.

Django parses a multipart body (and writes its files to disk) the first time anything reads
``request.POST`` or ``request.FILES`` — the CSRF check does, before any view runs. This
middleware answers 413 from the ``Content-Length`` header alone, and for bodies that do not
declare their length (chunked) it installs an upload handler that stops reading once the
limit is passed, so at most the limit is ever written.
"""

from __future__ import annotations

from typing import cast

from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.urls import reverse

from hermes_web.http import HtmxHttpRequest
from hermes_web.services.sessions import max_upload_bytes

# Form fields and multipart framing around the file.
SLACK_BYTES = 64 * 1024


def too_large_text() -> str:
    return f"file is larger than {max_upload_bytes() // 2**20} MB"


class SizeLimitHandler(FileUploadHandler):
    """Counts the bytes of every uploaded file; past the limit the upload stops."""

    def __init__(self, request: HttpRequest | None = None) -> None:
        super().__init__(request)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > max_upload_bytes():
            if self.request is not None:
                self.request.import_too_large = True  # type: ignore[attr-defined]  # read below
            # The rest of the body is read and dropped (a reset connection would leave the
            # client without the 413); nothing more is written.
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


def import_paths() -> tuple[str, ...]:
    return (reverse("import_page"), reverse("api:import_file"))


def too_large_response(request: HttpRequest) -> HttpResponse:
    return refusal_response(request, too_large_text(), 413)


def refusal_response(request: HttpRequest, problem: str, status: int) -> HttpResponse:
    """The refusal in the door's shape: JSON for ``/api/import``, the form's error otherwise."""
    if request.path.startswith(reverse("api:import_file")):
        return JsonResponse({"detail": problem}, status=status)
    from hermes_web.views.imports import too_large  # the page renders its own partial

    # django-htmx's middleware runs before this module's (settings.MIDDLEWARE).
    return too_large(cast(HtmxHttpRequest, request), problem, status)


def unreadable_upload_text(error: MultiPartParserError) -> str:
    if "header size" in str(error):
        # Django caps a part's headers at 1,024 bytes; the file name is the one that grows.
        return "cannot read the upload: the file name is too long (keep it under 1,000 characters)"
    return f"cannot read the upload: {error}"


class ImportUploadLimitMiddleware:
    """See the module docstring; only POSTs to the import page and ``/api/import``."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path in import_paths():
            try:
                declared = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                declared = 0
            if declared > max_upload_bytes() + SLACK_BYTES:
                return too_large_response(request)
            # Still a plain list: the body has not been read yet (Django freezes it then).
            request.upload_handlers.insert(0, SizeLimitHandler(request))  # type: ignore[union-attr]
            try:
                request.FILES  # noqa: B018 - parse now, under the limit, before any view or check
            except MultiPartParserError as error:  # else Django's bare HTML "Bad Request"
                return refusal_response(request, unreadable_upload_text(error), 400)
            if getattr(request, "import_too_large", False):
                return too_large_response(request)
        return self.get_response(request)
