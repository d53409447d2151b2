from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model, login
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_safe

from hermes_web import limits
from hermes_web.health import check_broker, check_database, check_workers
from hermes_web.limits import client_ip


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """Signed in: an overview. Signed out: what hermes-web is, the demo account, sign in/up."""
    if request.method == "HEAD":
        # Clients probe their base URL with HEAD before the first call (Claude Code does).
        return HttpResponse()
    if request.user.is_authenticated:
        from hermes_web.views.compactions import home_context

        return render(
            request, "hermes_web/home.html", {**home_context(request.user), "nav": "home"}
        )
    if not get_user_model().objects.exists():
        # A fresh install has nobody to log in as: lead the first visitor to sign up.
        return redirect("signup")
    from hermes_web.management.commands.load_demo import DEMO_PASSWORD, DEMO_USERNAME

    demo = (
        {"username": DEMO_USERNAME, "password": DEMO_PASSWORD}
        if settings.HERMES_DEMO_DATA
        and get_user_model().objects.filter(username=DEMO_USERNAME).exists()
        else None
    )
    return render(request, "hermes_web/landing.html", {"demo": demo})


class HermesLoginView(LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def get(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not get_user_model().objects.exists():
            return redirect("signup")
        return super().get(request, *args, **kwargs)

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        # Every username from one address counts here (axes counts per username and address).
        if limits.address_locked(client_ip(request) or "unknown"):
            return render(
                request,
                "registration/locked_out.html",
                {
                    "message": "Too many failed log-ins from your address.",
                    "cooloff_minutes": limits.login_window() // 60,
                },
                status=429,
            )
        return super().post(request, *args, **kwargs)


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("conversation_list")
    if request.method == "POST" and limits.signup_throttled(client_ip(request) or "unknown"):
        return render(
            request,
            "registration/locked_out.html",
            {"message": "Too many sign-up attempts from your address.", "cooloff_minutes": 60},
            status=429,
        )
    form: UserCreationForm[Any] = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("conversation_list")
    first_user = not get_user_model().objects.exists()
    return render(request, "registration/signup.html", {"form": form, "first_user": first_user})


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    database = check_database()
    broker = check_broker()
    workers = check_workers()  # not ok: jobs wait and no worker was seen in the last minute
    ok = database["ok"] and broker["ok"] and workers["ok"]
    return JsonResponse(
        {
            "status": "ok" if ok else "degraded",
            "database": database,
            "broker": broker,
            "workers": workers,
        },
        status=200 if ok else 503,
    )
