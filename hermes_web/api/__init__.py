"""The JSON API (django-ninja); OpenAPI docs at /api/docs.

One router per resource: ``sessions``, ``messages``, ``compactions``, ``import_export``,
``search``, ``hurt``;
lookups and paging shared in ``common``; refusals raised as ``errors.ApiRefusal`` and
answered by one exception handler each.
"""

import json
from typing import Any

from django.http import HttpRequest
from ninja import NinjaAPI, Schema, Swagger
from ninja.openapi.schema import OpenAPISchema
from ninja.operation import Operation
from ninja.parser import Parser
from ninja.security import django_auth

from hermes_web.api import compactions, fate, hurt, import_export, messages, search, sessions
from hermes_web.api.auth import ApiKeyAuth
from hermes_web.api.errors import install as install_error_handlers
from hermes_web.openai_compat.openapi import extend as extend_with_v1
from hermes_web.schemas import ErrorOut

__all__ = ["ApiKeyAuth", "ErrorOut", "api"]


class HermesAPI(NinjaAPI):
    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> OpenAPISchema:
        """Ninja's document plus the ``/v1`` model endpoints (plain Django views, described
        in ``openai_compat.openapi``), so ``/api/docs`` lists every endpoint a client calls."""
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        extend_with_v1(schema)  # in place: the document stays ninja's OpenAPISchema
        return schema

    def get_openapi_operation_id(self, operation: Operation) -> str:
        # The ids the API had when its routes lived in one module (hermes_web.api_sessions),
        # kept so clients generated from the OpenAPI document keep their method names.
        name = operation.view_func.__name__
        if operation.view_func.__module__ == __name__:
            return f"hermes_web_api_{name}"
        return f"hermes_web_api_sessions_{name}"


class ObjectBodyParser(Parser):
    """Every JSON body of this API is an object: anything else is refused (400, "Cannot parse
    request body") instead of reaching a schema whose fields all have defaults, which read
    ``[1, 2]`` as an empty object and created a session from it."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        body = json.loads(request.body)
        if not isinstance(body, dict):
            raise ValueError(f"the body must be a JSON object, not {type(body).__name__}")
        return body


# A bearer API key (scripts) or the browser's session cookie, which also requires CSRF.
api = HermesAPI(
    title="hermes-web",
    version="1",
    urls_namespace="api",
    auth=[ApiKeyAuth(), django_auth],
    parser=ObjectBodyParser(),
    # No deep links: Swagger UI then draws each operation's path as plain text instead of a
    # link nested inside its toggle button (axe: nested-interactive).
    docs=Swagger(settings={"deepLinking": False}),
)
install_error_handlers(api)
for module in (sessions, messages, compactions, import_export, fate, search, hurt):
    api.add_router("/", module.router)


class MeOut(Schema):
    username: str


@api.get("/me", response={200: MeOut, 401: ErrorOut}, tags=["account"])
def me(request: HttpRequest) -> dict:
    """The user the request is authenticated as."""
    return {"username": request.user.get_username()}
