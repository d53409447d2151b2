"""The JSON API (django-ninja); OpenAPI docs at /api/docs."""

from ninja import NinjaAPI, Schema
from ninja.security import django_auth

api = NinjaAPI(title="hermes-web", version="1", urls_namespace="api", auth=django_auth)


class ErrorOut(Schema):
    detail: str


class MeOut(Schema):
    username: str


@api.get("/me", response={200: MeOut, 401: ErrorOut}, tags=["account"])
def me(request):
    """The user the request is authenticated as."""
    return {"username": request.user.get_username()}
