"""Follow a fact over a conversation's chain, and the recall test of a compaction.

Thin views: the journey is ``services.fate.follow``, the test ``services.recall_test``.
"""

from __future__ import annotations

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from hermes_web.http import HtmxHttpRequest
from hermes_web.models import RecallTest, Session
from hermes_web.services.fate import follow
from hermes_web.services.recall_test import start_recall_test
from hermes_web.views.compactions import _compaction_for

# The native inspector page has no final list or slimming panel: its own sections instead.
_NATIVE_ANCHORS = {"final-list": "native-kept", "slimming": "split"}


def _link(entry: dict) -> None:
    anchor = entry["fate"]["anchor"]
    if entry["kind"] == "native":
        anchor = _NATIVE_ANCHORS.get(anchor, anchor)
    query = "?kind=fold" if entry["fate"]["kind"] == "folded" and entry["kind"] != "native" else ""
    entry["href"] = f"{reverse('compaction_detail', args=[entry['compaction']])}{query}#{anchor}"
    for replay in entry.get("replays") or ():
        _link(replay)


@require_GET
@login_required
def follow_fact(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """The journey of ``?q=`` over this conversation's chain: first appearance, then the
    fate in each compaction as a strip of cells linking to the inspector."""
    session = get_object_or_404(Session.objects.for_user(request.user), public_id=public_id)
    query = request.GET.get("q", "")
    journey, error = None, ""
    if query.strip():
        try:
            journey = follow(session, query)
        except ValueError as problem:
            error = str(problem)
        else:
            for entry in journey["compactions"]:
                _link(entry)
    context = {"session": session, "q": query, "journey": journey, "error": error}
    return render(
        request,
        "hermes_web/follow.html",
        context,
        status=400 if error else 200,
    )


@require_POST
@login_required
def recall_test_start(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """'Run a recall test' on the inspector: a plain form POST, then back to the panel."""
    compaction = _compaction_for(request, public_id, defer_report=True)
    try:
        questions = int(request.POST.get("questions") or 15)
        start_recall_test(compaction, requested_by=request.user, questions=questions)
    except ValueError as problem:
        flash.error(request, f"Recall test: {problem}.")
    return redirect(f"{reverse('compaction_detail', args=[compaction.public_id])}#recall-test")


@require_GET
@login_required
def recall_test_panel(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """The recall-test panel of a compaction (polled while a test runs; a page of its own
    without JavaScript)."""
    compaction = _compaction_for(request, public_id, defer_report=True)
    tests = list(RecallTest.objects.filter(compaction=compaction).order_by("-created_at")[:5])
    context = {"c": compaction, "recall_tests": tests}
    if request.htmx:
        return render(request, "hermes_web/_recall_test.html", context)
    return render(request, "hermes_web/recall_test.html", context)
