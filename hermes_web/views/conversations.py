"""Conversation list and conversation view (a window of messages with paging, archived rows
on request)."""

import functools
import json

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Exists, IntegerField, Max, OuterRef, Q, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from hermes_web.caching import FRAGMENT_SECONDS, LazyPanels
from hermes_web.http import HtmxHttpRequest
from hermes_web.importers.base import damage_lines
from hermes_web.importers.follow import followed_session_ids
from hermes_web.models import Compaction, Message, Session
from hermes_web.presenters.chat import chains_of
from hermes_web.presenters.messages import anchor_for, message_view
from hermes_web.presenters.native import agent_summary_texts
from hermes_web.services.sessions import conversation_stats
from hermes_web.views.lineage import compaction_tally

# Rows per window. 50 agent messages fill several screens; a window of 200 made the page of
# a long conversation ~190 KB on every view (issue #28: pages under load), where the next
# window is one click away, in place with htmx.
CHUNK = 50
LIST_LIMIT = 200
# A window also ends once its rows hold this much text: 50 rows of multi-megabyte tool
# output would otherwise cost the web process gigabytes for one page view.
WINDOW_BYTES = 4 * 1024 * 1024
# Positions are stored as 32-bit-safe integers; a larger ?start= means "past the end".
MAX_POSITION = 2**31 - 1


def _int_param(request: HtmxHttpRequest, name: str, default: int = 0) -> int:
    try:
        return min(MAX_POSITION, max(0, int(request.GET.get(name, default))))
    except (TypeError, ValueError):
        return default


def _row_bytes(row: Message) -> int:
    """Roughly how much text a row holds (content, tool calls, reasoning)."""
    size = 0
    for value in (row.content, row.tool_calls, row.reasoning):
        if isinstance(value, str):
            size += len(value)
        elif value:
            size += len(json.dumps(value, ensure_ascii=False))
    return size


def message_window(rows_qs, start: int) -> tuple[list[Message], int | None]:
    """Rows from ``start`` on: at most CHUNK of them and about WINDOW_BYTES of text (always
    at least one row), read in small batches; and the position the next window starts at."""
    rows: list[Message] = []
    total = 0
    iterator = rows_qs.filter(position__gte=start).order_by("position").iterator(chunk_size=25)
    for row in iterator:
        if len(rows) >= CHUNK or (rows and total >= WINDOW_BYTES):
            return rows, row.position
        rows.append(row)
        total += _row_bytes(row)
    return rows, None


def _window_back(rows_qs, before: int | None) -> int | None:
    """Where a window ending just before ``before`` (or at the end) starts: CHUNK rows back,
    fewer when their stored token counts (about 4 bytes each) pass WINDOW_BYTES."""
    if before is not None:
        rows_qs = rows_qs.filter(position__lt=before)
    first, size = None, 0
    for position, tokens in rows_qs.order_by("-position").values_list("position", "token_count")[
        :CHUNK
    ]:
        if first is not None and size >= WINDOW_BYTES:
            break
        first, size = position, size + 4 * (tokens or 0)
    return first


def _window_starts(rows_qs, start: int) -> tuple[int | None, int | None]:
    """Where the previous window starts (None at the top) and where the newest one does."""
    previous = _window_back(rows_qs, start) if start else None
    newest = _window_back(rows_qs, None)
    return previous, (newest if newest is not None and newest > start else None)


@require_GET
@login_required
def conversation_list(request: HtmxHttpRequest) -> HttpResponse:
    q = request.GET.get("q", "").strip()
    source = request.GET.get("source", "")
    sessions = Session.objects.for_user(request.user)
    if q:
        sessions = sessions.filter(Q(title__icontains=q) | Q(public_id__icontains=q))
    if source in Session.Source.values:
        sessions = sessions.filter(source=source)
    # An imported session with no messages (a tool's empty or metadata-only file, imported
    # before empties were left out) is noise in the list: listed only on request.
    show_empty = request.GET.get("empty") == "1"
    empty = Q(source__startswith="import:") & ~Exists(
        Message.objects.filter(session=OuterRef("pk"))
    )
    # One query counts the sessions and the hidden empties. The newest activity (of all of
    # them: a hidden session's change only renews the cache early) keys the template's cache
    # of the rows: any append, commit or new session moves it, so the cached rows are never
    # older than the data (or a minute). Counted before the per-row aggregates are annotated.
    summary = sessions.aggregate(
        every=Count("pk"), empties=Count("pk", filter=empty), latest=Max("updated_at")
    )
    hidden = 0 if show_empty else summary["empties"]
    if hidden:
        sessions = sessions.exclude(empty)
    total = summary["every"] - hidden
    context = {
        # Read by the template only when its cached rows are stale.
        "listing": LazyPanels(sessions=functools.partial(_list_rows, sessions)),
        "fragment_seconds": FRAGMENT_SECONDS,
        "total": total,
        "limited": total > LIST_LIMIT,
        "q": q,
        "source": source,
        "hidden_empty": hidden,
        "sources": Session.Source.choices,
        "has_any": total or Session.objects.for_user(request.user).exists(),
        "rows_key": summary["latest"].timestamp() if summary["latest"] else 0,
        "nav": "conversations",
    }
    template = "hermes_web/conversation_list.html"
    if request.htmx:
        template += "#conversation-rows"
    return render(request, template, context)


def _list_rows(sessions) -> list[dict]:
    """The newest ``LIST_LIMIT`` sessions with their message, token and compaction counts,
    grouped by rotation chain (the chat sidebar's presenter): each chain's live session first,
    then the rest latest first, with the chain's committed and undone compaction counts."""
    # Subqueries, not joins: counting messages and compactions in one join would multiply rows.
    active = Message.objects.filter(session=OuterRef("pk"), active=True).values("session")
    sessions = sessions.annotate(
        n_messages=Coalesce(Subquery(active.annotate(c=Count("pk")).values("c")[:1]), Value(0)),
        n_tokens=Coalesce(
            Subquery(active.annotate(t=Sum("token_count")).values("t")[:1]),
            Value(0),
            output_field=IntegerField(),
        ),
        n_compactions=Coalesce(
            Subquery(
                Compaction.objects.committed()
                .filter(session=OuterRef("pk"))
                .values("session")
                .annotate(c=Count("pk"))
                .values("c")[:1]
            ),
            Value(0),
        ),
        n_undone=Coalesce(
            Subquery(
                Compaction.objects.filter(session=OuterRef("pk"), status=Compaction.Status.UNDONE)
                .values("session")
                .annotate(c=Count("pk"))
                .values("c")[:1]
            ),
            Value(0),
        ),
        n_children=Count("children"),
    ).order_by("-updated_at")
    chains = chains_of(list(sessions[:LIST_LIMIT]), limit=LIST_LIMIT, untitled="")
    for chain in chains:
        members = chain["sessions"]
        chain["older"] = [s for s in members if s.pk != chain["tip"].pk]
        chain["n_compactions"] = sum(s.n_compactions for s in members)
        chain["n_undone"] = sum(s.n_undone for s in members)
    return chains


def _message_rows(session: Session, rows: list[Message], max_tokens: int) -> list[dict]:
    """View data per row, with tool calls linked to their results (even on another chunk)."""
    views = []
    in_chunk = {r.tool_call_id for r in rows if r.role == Message.Role.TOOL and r.tool_call_id}
    calls_in_chunk: set[str] = set()
    agents = agent_summary_texts(rows)
    for row in rows:
        view = message_view(
            {
                "role": row.role,
                "content": agents.get(row.position, row.content),
                "tool_calls": row.tool_calls,
                "tool_call_id": row.tool_call_id,
                "reasoning": row.reasoning,
                "token_count": row.token_count,
            },
            max_tokens=max_tokens,
        )
        calls_in_chunk.update(c["id"] for c in view["calls"])
        views.append({"row": row, **view})
    missing = {c["id"] for v in views for c in v["calls"] if c["id"] and c["id"] not in in_chunk}
    elsewhere = (
        dict(
            Message.objects.filter(session=session, tool_call_id__in=missing).values_list(
                "tool_call_id", "position"
            )
        )
        if missing
        else {}
    )
    for view in views:
        for call in view["calls"]:
            if call["id"] in in_chunk:
                call["result_href"] = f"#result-{call['anchor']}"
            elif call["id"] in elsewhere:
                call["result_href"] = f"?start={elsewhere[call['id']]}#result-{call['anchor']}"
            else:
                call["result_href"] = ""
        view["call_in_chunk"] = view["row"].tool_call_id in calls_in_chunk
    return views


@require_GET
@login_required
def conversation_detail(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    chunk_only = bool(request.htmx and request.GET.get("chunk"))
    sessions = Session.objects.for_user(request.user)
    if not chunk_only:
        # Most conversations have no compactions and no children: asked with the session
        # (two EXISTS), their panels then cost no query of their own.
        sessions = sessions.annotate(
            has_compactions=Exists(Compaction.objects.filter(session=OuterRef("pk"))),
            has_children=Exists(Session.objects.filter(parent=OuterRef("pk"))),
        )
    session = get_object_or_404(sessions, public_id=public_id)
    start = _int_param(request, "start")
    show_archived = request.GET.get("archived") == "1"
    stats = conversation_stats(session)

    visible = Message.objects.filter(session=session)
    if not show_archived:
        visible = visible.filter(active=True)

    @functools.cache
    def chunk() -> tuple[list[dict], int | None]:
        rows, next_start = message_window(visible.select_related("archived_by"), start)
        return _message_rows(session, rows, stats["biggest"] or 0), next_start

    starts = functools.cache(functools.partial(_window_starts, visible, start))
    # The template caches a chunk's HTML until the session is touched (Session.touch() moves
    # updated_at on every append and commit); ``page`` is read only when it renders anew.
    context = {
        "session": session,
        # The file it was imported from had lines that could not be read (issue #36).
        "damage": damage_lines((session.extra or {}).get("import_report")),
        "page": LazyPanels(
            messages=lambda: chunk()[0],
            next_start=lambda: chunk()[1],
            previous_start=lambda: starts()[0],
            newest_start=lambda: starts()[1],
        ),
        "fragment_seconds": FRAGMENT_SECONDS,
        "start": start,
        "show_archived": show_archived,
        "stats": stats,
        "nav": "conversations",
        # Its file is followed (importers.follow): the newest window polls for new rows.
        # Only an imported session can be (no query for a chat's page).
        "following": not chunk_only
        and session.source.startswith("import:")
        and session.pk in followed_session_ids(request.user),
    }
    if chunk_only:
        return render(request, "hermes_web/conversation_detail.html#message-chunk", context)
    # Reports can be megabytes of JSON; the list needs only the row's columns.
    compactions = (
        list(Compaction.objects.filter(session=session).defer("report").order_by("-queued_at")[:20])
        if session.has_compactions
        else []
    )
    kids = (
        list(Session.objects.filter(parent=session).order_by("created_at", "pk"))
        if session.has_children
        else []
    )
    context.update(
        archived=stats["archived"],
        compactions=compactions,
        # Sub-agents are children too, never rotations (importers.links).
        children=[c for c in kids if "sub_agent" not in (c.extra or {})],
        sub_agents=[c for c in kids if "sub_agent" in (c.extra or {})],
        # Counted the way the list and the timeline count (views.lineage.compaction_tally).
        tally=compaction_tally(
            Compaction.objects.filter(session=session), fetched=compactions, limit=20
        ),
        # A rotation always sets the new session's parent: without one, nothing to look up.
        produced_by=Compaction.objects.filter(
            result_session=session, mode=Compaction.Mode.ROTATION
        ).first()
        if session.parent_id
        else None,
    )
    return render(request, "hermes_web/conversation_detail.html", context)


@require_GET
@login_required
def message_detail(request: HtmxHttpRequest, public_id: str, position: int) -> HttpResponse:
    """One message in full (the conversation view shows long contents cut to a preview)."""
    session = get_object_or_404(Session.objects.for_user(request.user), public_id=public_id)
    row = Message.objects.filter(session=session, position=position).first()
    if row is None:
        raise Http404("no message at that position")
    view = message_view(
        {
            "role": row.role,
            "content": agent_summary_texts([row]).get(row.position, row.content),
            "tool_calls": row.tool_calls,
            "tool_call_id": row.tool_call_id,
            "reasoning": row.reasoning,
            "token_count": row.token_count,
        },
        preview_chars=10**9,
    )
    # Each call's result is another row of the session: link it, so "(no result)" is said
    # only of a call that has none.
    ids = [c["id"] for c in view["calls"] if c["id"]]
    results = (
        dict(
            Message.objects.filter(session=session, tool_call_id__in=ids)
            .exclude(position=row.position)
            .values_list("tool_call_id", "position")
        )
        if ids
        else {}
    )
    for call in view["calls"]:
        result_at = results.get(call["id"])
        call["result_href"] = (
            reverse("message_detail", args=[session.public_id, result_at])
            if result_at is not None
            else ""
        )
    return render(
        request,
        "hermes_web/message_detail.html",
        {
            "session": session,
            "m": {"row": row, **view},
            "anchor_for": anchor_for,
            "nav": "conversations",
        },
    )
