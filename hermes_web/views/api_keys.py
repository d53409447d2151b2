"""API keys for the JSON API and the /v1 endpoint: created, shown once, revoked."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from hermes_web.models import ApiKey


def _keys(request) -> list[ApiKey]:
    return list(ApiKey.objects.filter(owner=request.user))


# The session key that carries a new raw key from the POST to the one GET that shows it.
NEW_KEY_SESSION = "hermes_new_api_key"


@require_GET
@login_required
def api_keys(request: HttpRequest) -> HttpResponse:
    context: dict = {"keys": _keys(request)}
    shown = request.session.pop(NEW_KEY_SESSION, None)  # once: a reload no longer has it
    if isinstance(shown, dict):
        new_key = next((k for k in context["keys"] if k.pk == shown.get("id")), None)
        if new_key is not None and new_key.revoked_at is None:
            context.update(new_key=new_key, raw_key=str(shown.get("raw") or ""))
    return render(request, "hermes_web/api_keys.html", context)


@require_POST
@login_required
def create_api_key(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "").strip()
    if not name or len(name) > 100:
        return render(
            request,
            "hermes_web/api_keys.html",
            {
                "keys": _keys(request),
                "name_error": "Give the key a name (up to 100 characters).",
                "name": name[:100],
            },
            status=400,
        )
    key, raw = ApiKey.issue(owner=request.user, name=name)
    # POST, redirect, GET: a reload of the page shows the list and creates nothing. The raw
    # key rides in the server-side session to that one GET, which removes it.
    request.session[NEW_KEY_SESSION] = {"id": key.pk, "raw": raw}
    return redirect("api_keys")


# A revoke names its key by a prefix of the key's hash (the page uses 24 characters). Short
# prefixes are refused: one character would pick a key nearly at random.
MIN_KEY_ID_CHARS = 12


def _refuse_revoke(request: HttpRequest, message: str, status: int) -> HttpResponse:
    messages.error(request, message)
    return render(request, "hermes_web/api_keys.html", {"keys": _keys(request)}, status=status)


@require_POST
@login_required
def revoke_api_key(request: HttpRequest, key_id: str) -> HttpResponse:
    key_id = key_id.strip().lower()
    if len(key_id) < MIN_KEY_ID_CHARS or len(key_id) > 64 or not key_id.isalnum():
        return _refuse_revoke(
            request,
            f"A key id is {MIN_KEY_ID_CHARS} to 64 letters or digits of the key; nothing was revoked.",
            400,
        )
    matches = list(ApiKey.objects.filter(owner_id=request.user.pk, key_hash__startswith=key_id)[:2])
    if len(matches) > 1:
        return _refuse_revoke(
            request,
            f"The id {key_id!r} matches more than one of your keys; give more of it. "
            "Nothing was revoked.",
            409,
        )
    if not matches:
        raise Http404("no key of yours has that id")
    key = matches[0]
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        messages.success(request, f"Revoked “{key.name}”. Requests with it now get 401.")
    return redirect("api_keys")
