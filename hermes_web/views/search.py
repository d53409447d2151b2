"""The search page: everything the signed-in user stored, one box (``services.search``)."""

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
    form = {
        "q": get.get("q", ""),
        "kind": get.getlist("kind"),
        "role": get.getlist("role"),
        "source": [s for s in get.getlist("source") if s],
        "conversation": get.get("conversation", ""),
        "since": get.get("since", ""),
        "until": get.get("until", ""),
    }
    context = {
        "nav": "search",
        "form": form,
        "kinds": [(k, KIND_LABELS[k]) for k in KINDS],
        "roles": Message.Role.values,
        "sources": Session.Source.choices,
        "result": None,
        "error": "",
    }
    status = 200
    if form["q"].strip():
        try:
            query = parse_query(
                form["q"],
                kinds=form["kind"],
                roles=form["role"],
                sources=form["source"],
                conversation=form["conversation"],
                since=form["since"],
                until=form["until"],
            )
            result = search(request.user, query, offset=_offset(request), limit=PAGE)
            context["result"] = result
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
