"""The search page: everything the signed-in user stored, one box (``services.search``)."""

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from hermes_web.http import HtmxHttpRequest
from hermes_web.models import Message, Session
from hermes_web.services.search import KINDS, SearchError, parse_query, search

PAGE = 20
KIND_LABELS = {
    "message": "messages",
    "tool_call": "tool calls",
    "tool_result": "tool results",
    "summary": "summaries",
    "ledger": "fact ledgers",
    "native_summary": "agents' own summaries",
}
HIT_LABELS = {
    "message": "message",
    "tool_call": "tool call",
    "tool_result": "tool result",
    "summary": "summary",
    "ledger": "fact ledger",
    "native_summary": "agent's own summary",
}


def _offset(request: HtmxHttpRequest) -> int:
    try:
        return min(10**6, max(0, int(request.GET.get("offset", 0))))
    except ValueError:
        return 0


@require_GET
@login_required
def search_page(request: HtmxHttpRequest) -> HttpResponse:
    """``/search/?q=``: the form, and the hits when there is a query (a 400 page for a bad one)."""
    get = request.GET
    q = get.get("q", "")
    kinds, roles = get.getlist("kind"), get.getlist("role")
    sources = [s for s in get.getlist("source") if s]
    conversation, since, until = (get.get(k, "") for k in ("conversation", "since", "until"))
    form = {
        "q": q,
        "kind": kinds,
        "role": roles,
        "source": sources,
        "conversation": conversation,
        "since": since,
        "until": until,
    }
    context: dict[str, Any] = {
        "nav": "search",
        "form": form,
        "kinds": [(k, KIND_LABELS[k]) for k in KINDS],
        "roles": Message.Role.values,
        "sources": Session.Source.choices,
        "result": None,
        "error": "",
    }
    status = 200
    if q.strip():
        try:
            query = parse_query(
                q,
                kinds=kinds,
                roles=roles,
                sources=sources,
                conversation=conversation,
                since=since,
                until=until,
            )
            result = search(request.user, query, offset=_offset(request), limit=PAGE)
            context["result"] = result
            # "Follow this" follows one literal through the hit's chain: the longest term
            # (a phrase is one term), the most specific thing the user typed.
            context["follow_q"] = max(query.terms, key=len) if query.terms else ""
            context["hits"] = [(hit, HIT_LABELS[hit.kind]) for hit in result.hits]
        except SearchError as error:
            context["error"] = str(error)
            status = 400
        # The query string without the offset: the pager's links add their own.
        params = request.GET.copy()
        params.pop("offset", None)
        context["base_query"] = params.urlencode()
    template = "hermes_web/search.html"
    if request.htmx and request.htmx.target == "search-results":
        template += "#search-results"
    return render(request, template, context, status=status)
