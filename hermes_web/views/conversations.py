from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from hermes_web.models import Session


@require_GET
@login_required
def conversation_list(request: HttpRequest) -> HttpResponse:
    sessions = Session.objects.for_user(request.user)
    return render(request, "hermes_web/conversation_list.html", {"sessions": sessions})
