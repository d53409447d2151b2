"""Refusals a route raises instead of building the response by hand; one handler answers each.

Every refusal answers ``{"detail": "..."}`` with its status; the routes declare the same
statuses (``ErrorOut``) in their ``response=`` so the OpenAPI document lists them.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI

from hermes_web.services.compactions import CompactionBusy


class ApiRefusal(Exception):
    """A request the API refuses with ``status`` and a ``detail`` saying why."""

    status = 400

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


class Conflict(ApiRefusal):
    """409: the request is valid but the resource's state forbids it now."""

    status = 409


class Unprocessable(ApiRefusal):
    """422: a parameter or body the API cannot act on (what and where in ``detail``)."""

    status = 422


class TooLarge(ApiRefusal):
    """413: an upload over the size limit."""

    status = 413


def install(api: NinjaAPI) -> None:
    """Register the handlers that turn refusals into ``{"detail"}`` responses."""

    @api.exception_handler(ApiRefusal)
    def refused(request: HttpRequest, error: ApiRefusal) -> HttpResponse:
        return api.create_response(request, {"detail": error.detail}, status=error.status)

    @api.exception_handler(CompactionBusy)
    def busy(request: HttpRequest, error: CompactionBusy) -> HttpResponse:
        # "compaction <id> is already <status> for this session"
        return api.create_response(request, {"detail": str(error)}, status=409)
