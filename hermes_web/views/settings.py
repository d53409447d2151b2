"""Settings: API keys for the JSON API (created, shown once, revoked)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from hermes_web.models import ApiKey


def _keys(request) -> list[ApiKey]:
    return list(ApiKey.objects.filter(owner=request.user))


@require_GET
@login_required
def api_keys(request: HttpRequest) -> HttpResponse:
    return render(request, "hermes_web/api_keys.html", {"keys": _keys(request)})


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
    # Rendered, not redirected: the raw key exists only in this response.
    return render(
        request,
        "hermes_web/api_keys.html",
        {"keys": _keys(request), "new_key": key, "raw_key": raw},
    )


@require_POST
@login_required
def revoke_api_key(request: HttpRequest, key_id: str) -> HttpResponse:
    key = get_object_or_404(
        ApiKey.objects.filter(owner=request.user), key_hash__startswith=key_id[:64]
    )
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        messages.success(request, f"Revoked “{key.name}”. Requests with it now get 401.")
    return redirect("api_keys")
