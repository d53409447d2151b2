"""Pages whose capability has not landed yet; each says so instead of failing."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET


def _coming(request: HttpRequest, title: str) -> HttpResponse:
    return render(request, "hermes_web/coming_soon.html", {"title": title})


@require_GET
@login_required
def chat(request: HttpRequest) -> HttpResponse:
    return _coming(request, "Chat")


@require_GET
@login_required
def compare(request: HttpRequest) -> HttpResponse:
    return _coming(request, "Compare")


@require_GET
@login_required
def import_page(request: HttpRequest) -> HttpResponse:
    return _coming(request, "Import")
