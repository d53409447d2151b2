from django.contrib.auth import get_user_model, login
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from hermes_web.health import check_broker, check_database, check_workers


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("conversation_list")
    if not get_user_model().objects.exists():
        # A fresh install has nobody to log in as: lead the first visitor to sign up.
        return redirect("signup")
    return redirect("login")


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
