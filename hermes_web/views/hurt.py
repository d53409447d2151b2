"""The "where compaction hurt" page: every stored session of the user at once (``services.hurt``)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from hermes_web.http import HtmxHttpRequest
from hermes_web.presenters.hurt import hurt_context
from hermes_web.services.hurt import hurt_report


@require_GET
@login_required
def hurt_page(request: HtmxHttpRequest) -> HttpResponse:
    """``/hurt/``: loops, summary growth, miscounts, rules lost and re-reads, by agent and project."""
    context = {"nav": "hurt", **hurt_context(hurt_report(request.user))}
    return render(request, "hermes_web/hurt.html", context)
