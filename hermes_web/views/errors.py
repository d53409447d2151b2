"""Django's error views (``handler400``/``403``/``500``), in the shape of the route: on ``/v1``
the protocol's JSON error, never Django's HTML page. What Django answers itself (a request it
cannot parse, a view's unhandled exception) is the last boundary of the model endpoints: no
traceback or path is in these bodies, only what happened."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views import defaults

from hermes_web.middleware import refusal


def _v1(request: HttpRequest) -> bool:
    return request.path.startswith("/v1/") or request.path == "/v1"


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """400: Django refused the request (a suspicious host or header, a malformed body)."""
    if _v1(request):
        return refusal(request, "The request could not be read.", 400, code="invalid_request")
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """403 (a CSRF failure has its own view; this is PermissionDenied from a view)."""
    if _v1(request):
        return refusal(request, "Permission denied.", 403, code="permission_denied")
    return defaults.permission_denied(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """500: an unhandled exception (logged with its traceback on the server, not sent)."""
    if _v1(request):
        return refusal(request, "The server failed on this request.", 500, code="server_error")
    return defaults.server_error(request)
