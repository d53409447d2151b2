"""The rotation tree and the compaction timeline of a conversation's lineage."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Sum
from django.db.models.fields.json import KT
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from hermes_web.models import Compaction, Message, Session
from hermes_web.presenters.lineage import timeline_chart
from hermes_web.presenters.vocabulary import tally_compactions, term
from hermes_web.services.native import agent_thresholds
from hermes_web.services.sessions import session_tree
from hermes_web.views.compactions import _session_for


def compaction_tally(runs, *, fetched: list[Compaction] | None = None, limit: int = 0) -> dict:
    """Count a queryset of compactions the way every page does (``tally_compactions``).

    A page that already fetched the newest ``limit`` rows passes them as ``fetched``: when
    fewer came back, they are all of them and no count query is needed.
    """
    if fetched is not None and len(fetched) < limit:
        return tally_compactions((c.status, c.trigger, 1) for c in fetched)
    rows = runs.order_by().values_list("status", "trigger").annotate(n=Count("pk"))
    return tally_compactions(rows)


def _lineage_compactions(session: Session):
    return Compaction.objects.for_lineage(session).real()


@require_GET
@login_required
def conversation_tree(request: HttpRequest, public_id: str) -> HttpResponse:
    session = _session_for(request, public_id)
    nodes = session_tree(session)
    ids = [n.pk for n in nodes]
    stats = {
        row["session"]: row
        for row in Message.objects.filter(session_id__in=ids, active=True)
        .values("session")
        .annotate(n=Count("pk"), tokens=Sum("token_count"))
    }
    compactions = list(
        # Undone runs stay drawn (marked): the undo is part of the lineage's history.
        Compaction.objects.filter(
            session_id__in=ids,
            status__in=(Compaction.Status.COMMITTED, Compaction.Status.UNDONE),
        )
        .defer("report")
        .order_by("finished_at")
    )
    edges = {c.result_session_id: c for c in compactions if c.mode == Compaction.Mode.ROTATION}
    events: dict[int, list[Compaction]] = {}
    for c in compactions:
        if c.mode == Compaction.Mode.IN_PLACE:
            events.setdefault(c.session_id, []).append(c)
    children: dict[int | None, list[Session]] = {}
    by_id = {n.pk: n for n in nodes}
    for n in nodes:
        parent = n.parent_id if n.parent_id in by_id else None
        children.setdefault(parent, []).append(n)
    # Depth-first order with a depth per node: a flat list renders any depth without recursion.
    ordered = []
    stack = [(n, 0) for n in reversed(children.get(None, []))]
    while stack:
        node, depth = stack.pop()
        s = stats.get(node.pk, {})
        ordered.append(
            {
                "s": node,
                "depth": min(depth, 12),
                "real_depth": depth,
                "n": s.get("n", 0),
                "tokens": s.get("tokens") or 0,
                "edge": edges.get(node.pk),
                "events": events.get(node.pk, []),
                "current": node.pk == session.pk,
            }
        )
        stack.extend((child, depth + 1) for child in reversed(children.get(node.pk, [])))
    return render(
        request,
        "hermes_web/tree.html",
        {"session": session, "nodes": ordered, "nav": "conversations"},
    )


def _native_counts(runs: list[Compaction]) -> dict[int, tuple[int, int]]:
    """Our token counts (before, after) of agents' own compactions, for what their
    transcripts did not record; two keys of the report, not the whole report."""
    if not runs:
        return {}
    rows = Compaction.objects.filter(pk__in=[c.pk for c in runs]).values_list(
        "pk", KT("report__tokens__counted_before"), KT("report__tokens__counted_after")
    )
    return {pk: (int(before or 0), int(after or 0)) for pk, before, after in rows}


@require_GET
@login_required
def conversation_timeline(request: HttpRequest, public_id: str) -> HttpResponse:
    session = _session_for(request, public_id)
    lineage = Compaction.objects.for_lineage(session)
    tally = compaction_tally(lineage)
    runs = list(
        _lineage_compactions(session)
        .select_related("session")
        .defer("report")
        .order_by("queued_at", "pk")
    )
    counted = _native_counts([c for c in runs if c.is_native])
    points = [
        {
            "label": f"#{i}",
            "title": (
                f"{c.source_label + ' · ' if c.is_native else ''}{term('trigger', c.trigger)} "
                f"{term('mode', c.mode)} · {term('status', c.status)}"
            ),
            # One scale: an agent's compaction by our count of its rows (its own figures,
            # another tokenizer and its system prompt, are on its inspector page).
            "before": counted[c.pk][0] if c.pk in counted else c.tokens_before or 0,
            "after": (
                counted[c.pk][1]
                if c.pk in counted
                else c.tokens_after
                if c.tokens_after is not None
                else (c.tokens_before or 0)
            ),
            "status": c.status,
            "reason": c.reason,
            "url": reverse("compaction_detail", args=[c.public_id]),
            "when": c.queued_at,
            "c": c,
        }
        for i, c in enumerate(runs, start=1)
    ]
    from hermes_web.services.compactions import compaction_config_for

    config = compaction_config_for(session)
    # Our threshold says nothing about when an agent compacted on its own: drawn only when
    # the chain holds a compaction of ours.
    ours = not runs or any(not c.is_native for c in runs)
    agents = sorted({c.get_source_display() for c in runs if c.is_native})
    # An agent's own threshold where its transcripts tell it (services.native.agent_thresholds).
    thresholds = agent_thresholds(runs)
    chart = timeline_chart(
        points,
        threshold=config.threshold_tokens if ours else None,
        window=config.context_length,
        agent_lines=[t for t in thresholds if t["value"]],
    )
    drawn = {line["agent"]: line["on_chart"] for line in chart["agent_lines"]}
    for t in thresholds:
        t["on_chart"] = drawn.get(t["agent"], False)
    return render(
        request,
        "hermes_web/timeline.html",
        {
            "session": session,
            "chart": chart,
            "tally": tally,
            "agents": agents,
            "agent_thresholds": thresholds,
            "nav": "conversations",
        },
    )
