from django.conf import settings
from django.contrib.auth import get_user_model, login
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from hermes_web.health import check_broker, check_database


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Signed in: an overview. Signed out: what hermes-web is, the demo account, sign in/up."""
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


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("conversation_list")
    form = UserCreationForm(request.POST or None)
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
    ok = database["ok"] and broker["ok"]
    return JsonResponse(
        {"status": "ok" if ok else "degraded", "database": database, "broker": broker},
        status=200 if ok else 503,
    )
