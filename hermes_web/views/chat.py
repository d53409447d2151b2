"""The chat: session list, transcript, sending, live turn and compaction status, commands.

Without JavaScript every action is a form POST followed by a redirect, and a reload shows
the reply once the worker has written it. With htmx the reply streams in by polling the
turn's partial every second, and the compaction row polls until it finishes; a committed
rotation moves the page to the continuation session.
"""

from __future__ import annotations

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import (
    HTMX_STOP_POLLING,
    HttpResponseClientRedirect,
    HttpResponseClientRefresh,
    reswap,
    retarget,
)

from hermes_web.agent import model_label
from hermes_web.agent.render import chat_items
from hermes_web.agent.runner import (
    ChatBusy,
    active_turn,
    compress,
    context_meter,
    latest_compaction,
    send_message,
    set_mode,
    start_chat,
)
from hermes_web.models import AgentTurn, Compaction, Message, Session
from hermes_web.services.compactions import CompactionRefused
from hermes_web.services.sessions import resolve_tip

TEMPLATE = "hermes_web/chat.html"
MAX_MESSAGE_CHARS = 100_000
NUL_MESSAGE = "The message contains a NUL character (U+0000); remove it and send again."
TRANSCRIPT_LIMIT = 400


def _session_for(request: HttpRequest, public_id: str) -> Session:
    return get_object_or_404(Session.objects.for_user(request.user), public_id=public_id)


def _sidebar(request: HttpRequest) -> list[Session]:
    return list(
        Session.objects.for_user(request.user)
        .filter(source=Session.Source.CHAT)
        .exclude(end_reason="compression")
        .order_by("-updated_at")[:50]
    )


def _marker_for(rows: list[Message], session: Session) -> dict[int, Compaction]:
    """Summary message id -> the compaction that wrote it (for the marker's inspector link)."""
    summaries = [r for r in rows if r.is_summary]
    if not summaries:
        return {}
    made = list(
        Compaction.objects.filter(
            result_session=session, status=Compaction.Status.COMMITTED
        ).order_by("-finished_at")
    )
    by_time = {c.finished_at: c for c in made}
    return {r.pk: by_time.get(r.created_at) or made[0] for r in summaries if made}


def _turn_context(turn: AgentTurn) -> dict:
    ids = list((turn.usage or {}).get("message_ids") or [])
    rows = list(Message.objects.filter(pk__in=ids).order_by("position")) if ids else []
    blocked = None
    if turn.status == AgentTurn.Status.QUEUED:
        blocked = (
            Compaction.objects.filter(
                session_id=turn.session_id,
                status__in=(Compaction.Status.QUEUED, Compaction.Status.RUNNING),
            )
            .exclude(trigger=Compaction.Trigger.WHAT_IF)
            .first()
        )
    return {
        "turn": turn,
        "turn_items": chat_items(rows),
        "turn_blocked_by": blocked,
        "turn_active": turn.status in (AgentTurn.Status.QUEUED, AgentTurn.Status.RUNNING),
        "turn_model_label": model_label(turn.model),
    }


def _page_context(request: HttpRequest, session: Session, **extra) -> dict:
    turn = active_turn(session)
    if turn is None:
        last = AgentTurn.objects.filter(session=session).order_by("-created_at").first()
        turn = last if last is not None and last.status == AgentTurn.Status.FAILED else None
    hidden = set((turn.usage or {}).get("message_ids") or []) if turn else set()
    rows = list(Message.objects.filter(session=session).active().exclude(pk__in=hidden))
    earlier = max(0, len(rows) - TRANSCRIPT_LIMIT)
    rows = rows[earlier:]
    items = chat_items(rows)
    markers = _marker_for(rows, session)
    for item in items:
        item["compaction"] = markers.get(item["row"].pk)
    context = {
        "nav": "chat",
        "session": session,
        "sessions": _sidebar(request),
        "items": items,
        "earlier": earlier,
        "meter": context_meter(session),
        "compaction": latest_compaction(session),
        "model_label": model_label(session.model),
        "draft": "",
    }
    if turn is not None:
        context.update(_turn_context(turn))
    context.update(extra)
    return context


@require_GET
@login_required
def chat(request: HttpRequest) -> HttpResponse:
    return render(
        request, TEMPLATE, {"nav": "chat", "session": None, "sessions": _sidebar(request)}
    )


@require_POST
@login_required
def chat_new(request: HttpRequest) -> HttpResponse:
    if "\x00" in (request.POST.get("message") or ""):
        # Refused before the chat exists: nothing is half-created (PostgreSQL cannot store NUL).
        return HttpResponseBadRequest(NUL_MESSAGE, content_type="text/plain")
    session = start_chat(owner=request.user)
    if request.POST.get("workspace") == "chat":
        # The agent gets a copy of the template for this chat alone (see agent.tools).
        session.extra = {**session.extra, "workspace": "chat"}
        session.save(update_fields=["extra"])
    text = (request.POST.get("message") or "").strip()
    if text and not text.startswith("/"):
        send_message(session=session, text=text[:MAX_MESSAGE_CHARS])
    return redirect("chat_detail", public_id=session.public_id)


@require_GET
@login_required
def chat_detail(request: HttpRequest, public_id: str) -> HttpResponse:
    session = _session_for(request, public_id)
    tip = resolve_tip(session)
    if tip.pk != session.pk:
        # The conversation went on in a rotation child: a reload of the old URL follows it.
        return redirect("chat_detail", public_id=tip.public_id)
    return render(request, TEMPLATE, _page_context(request, session))


def _refuse(
    request: HttpRequest, session: Session, message: str, status: int, draft: str = ""
) -> HttpResponse:
    if request.htmx:
        response = render(request, TEMPLATE + "#composer-error", {"error": message}, status=status)
        return reswap(retarget(response, "#composer-error"), "outerHTML")
    return render(
        request,
        TEMPLATE,
        _page_context(request, session, error=message, draft=draft),
        status=status,
    )


def _command(request: HttpRequest, session: Session, text: str) -> HttpResponse:
    name, _, argument = text[1:].partition(" ")
    name = name.lower()
    try:
        if name == "compress":
            run = compress(session=session, user=request.user, focus=argument)
            note = f"Compaction {run.get_status_display()}" + (
                f" with focus “{run.focus}”." if run.focus else "."
            )
        elif name == "mode":
            value = set_mode(session=resolve_tip(session), mode=argument or "")
            note = f"Compaction mode for this chat: {'in-place' if value == 'in_place' else value}."
        else:
            return _refuse(
                request,
                session,
                f"Unknown command /{name}. Commands: /compress [focus], /mode rotation|in-place.",
                400,
                text,
            )
    except ChatBusy as busy:
        return _refuse(request, session, str(busy).capitalize() + ".", 409, text)
    except CompactionRefused as refused:
        return _refuse(request, session, str(refused).capitalize() + ".", 409, text)
    except ValueError:
        return _refuse(request, session, "Usage: /mode rotation or /mode in-place.", 400, text)
    flash.success(request, note)
    if request.htmx:
        return HttpResponseClientRefresh()
    return redirect("chat_detail", public_id=resolve_tip(session).public_id)


@require_POST
@login_required
def chat_send(request: HttpRequest, public_id: str) -> HttpResponse:
    session = _session_for(request, public_id)
    text = (request.POST.get("message") or "").strip()
    if not text:
        return _refuse(request, session, "Type a message first (the message field was empty).", 400)
    if len(text) > MAX_MESSAGE_CHARS:
        return _refuse(
            request,
            session,
            f"The message is {len(text):,} characters; the limit is {MAX_MESSAGE_CHARS:,}.",
            400,
        )
    if "\x00" in text:
        return _refuse(request, session, NUL_MESSAGE, 400, text.replace("\x00", ""))
    if text.startswith("/"):
        return _command(request, session, text)
    try:
        turn = send_message(session=session, text=text)
    except ChatBusy as busy:
        return _refuse(request, session, str(busy).capitalize() + ".", 409, text)
    if not request.htmx:
        return redirect("chat_detail", public_id=turn.session.public_id)
    turn.refresh_from_db()
    user_row = (
        Message.objects.filter(session_id=turn.session_id, role=Message.Role.USER)
        .order_by("-position")
        .first()
    )
    context = {
        "sent_items": chat_items([user_row]) if user_row else [],
        "session": turn.session,
        "meter": context_meter(turn.session),
        "compaction": latest_compaction(turn.session),
        **_turn_context(turn),
    }
    return render(request, TEMPLATE + "#sent", context)


@require_POST
@login_required
def chat_compress(request: HttpRequest, public_id: str) -> HttpResponse:
    session = _session_for(request, public_id)
    focus = (request.POST.get("focus") or "").strip()
    return _command(request, session, f"/compress {focus}".strip())


@require_GET
@login_required
def chat_turn_status(request: HttpRequest, public_id: str) -> HttpResponse:
    turn = get_object_or_404(
        AgentTurn.objects.for_user(request.user).select_related("session"), public_id=public_id
    )
    if turn.status in (AgentTurn.Status.QUEUED, AgentTurn.Status.RUNNING):
        active_turn(turn.session)  # reaps it if its worker died
        turn.refresh_from_db()
    context = {**_turn_context(turn), "session": turn.session}
    if not request.htmx:
        return redirect("chat_detail", public_id=turn.session.public_id)
    if context["turn_active"]:
        return render(request, TEMPLATE + "#turn-status", context)
    session = Session.objects.get(pk=turn.session_id)
    context.update(
        {
            "session": session,
            "meter": context_meter(session),
            "compaction": latest_compaction(session),
            "oob": True,
        }
    )
    return render(request, TEMPLATE + "#turn-final", context, status=HTMX_STOP_POLLING)


@require_GET
@login_required
def chat_compaction_status(request: HttpRequest, public_id: str) -> HttpResponse:
    run = get_object_or_404(
        Compaction.objects.for_user(request.user).select_related("session", "result_session"),
        public_id=public_id,
    )
    if not request.htmx:
        return redirect("chat_detail", public_id=run.session.public_id)
    if run.is_finished and run.status == Compaction.Status.COMMITTED:
        if run.result_session_id and run.result_session_id != run.session_id:
            # Rotation: the chat continues in the child session, and the URL follows.
            return HttpResponseClientRedirect(
                reverse("chat_detail", args=[run.result_session.public_id])
            )
        return HttpResponseClientRefresh()  # in place: same URL, the transcript is now compacted
    status = HTMX_STOP_POLLING if run.is_finished else 200
    return render(
        request,
        TEMPLATE + "#compaction-status",
        {"compaction": run, "session": run.session},
        status=status,
    )
