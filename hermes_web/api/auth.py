"""API authentication: a bearer API key (the browser's session cookie is ninja's django_auth)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja.security import HttpBearer

from hermes_web.auth import authenticate_api_key
from hermes_web.models import ApiKey


class ApiKeyAuth(HttpBearer):
    """``Authorization: Bearer hk_…``: a usable key of an active user."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        key = authenticate_api_key(token)
        if key is not None:
            request.user = key.owner
        return key
