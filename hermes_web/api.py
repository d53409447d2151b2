"""The JSON API (django-ninja); OpenAPI docs at /api/docs."""

from ninja import NinjaAPI, Schema
from ninja.security import django_auth

from hermes_web.api_sessions import ApiKeyAuth
from hermes_web.api_sessions import router as sessions_router
from hermes_web.schemas import ErrorOut

# A bearer API key (scripts) or the browser's session cookie, which also requires CSRF.
api = NinjaAPI(
    title="hermes-web", version="1", urls_namespace="api", auth=[ApiKeyAuth(), django_auth]
)
api.add_router("/", sessions_router)

__all__ = ["ErrorOut", "api"]


class MeOut(Schema):
    username: str


@api.get("/me", response={200: MeOut, 401: ErrorOut}, tags=["account"])
def me(request):
    """The user the request is authenticated as."""
    return {"username": request.user.get_username()}
