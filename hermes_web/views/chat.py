"""The chat: session list, transcript, sending, live turn and compaction status, commands.

Without JavaScript every action is a form POST followed by a redirect, and a reload shows
the reply once the worker has written it. With htmx the reply streams in by polling the
turn's partial every second (Markdown rendered by the server with the same sanitizer as the
final reply), and the compaction row polls until it finishes; a committed rotation moves the
page to the continuation session, a committed in-place run drops its marker into the
transcript. Messages sent while a turn runs are queued, never refused; a refusal (bad
command, too long) keeps the text in the box. The page shows the newest messages only, with
an "earlier messages" link that loads the previous page of them.
"""

# Over 450 lines: the chat page and its htmx partials (send, stop, status polls, undo) share the
# page context and the refusal rendering; each view stays a few lines.

from __future__ import annotations

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import (
    HTMX_STOP_POLLING,
    HttpResponseClientRedirect,
    HttpResponseClientRefresh,
    reswap,
    retarget,
)

from hermes_web.http import HtmxHttpRequest
from hermes_web.llm_models import model_label
from hermes_web.models import AgentTurn, Compaction, Message, Session
from hermes_web.presenters.chat import (
    chat_chains,
    chat_items,
    compaction_outcome,
    render_markdown,
    restore_folded,
)
from hermes_web.services.chat import (
    ChatBusy,
    RegenerateRefused,
    active_turns,
    compress,
    context_meter,
    latest_compaction,
    regenerable_reply,
    regenerate_reply,
    request_stop,
    send_message,
    set_mode,
    start_chat,
)
from hermes_web.services.compactions import CompactionRefused
from hermes_web.services.sessions import resolve_tip
from hermes_web.services.undo import UndoRefused, redo_compaction, undo_compaction, undo_state

TEMPLATE = "hermes_web/chat.html"
TURN_TEMPLATE = "hermes_web/_chat_turn.html"
MAX_MESSAGE_CHARS = 100_000
NUL_MESSAGE = "The message contains a NUL character (U+0000); remove it and send again."
TRANSCRIPT_LIMIT = 60  # newest messages on the page; "earlier" loads as many again


def _session_for(request: HttpRequest, public_id: str) -> Session:
    return get_object_or_404(Session.objects.for_user(request.user), public_id=public_id)


def _marker_for(rows: list[Message], session: Session) -> dict[int, Compaction]:
    """Summary message id -> the compaction that wrote it (for the marker's inspector link)."""
    summaries = [r for r in rows if r.is_summary]
    if not summaries:
        return {}
    made = list(
        Compaction.objects.committed().filter(result_session=session).order_by("-finished_at")
    )
    by_time = {c.finished_at: c for c in made}
    return {r.pk: by_time.get(r.created_at) or made[0] for r in summaries if made}


def _items(rows: list[Message], session: Session) -> list[dict]:
    items = chat_items(rows)
    restore_folded(items, session)
    markers = _marker_for(rows, session)
    for item in items:
        item["compaction"] = markers.get(item["row"].pk)
    _mark_old_prompts(items, session)
    return items


def _mark_old_prompts(items: list[dict], session: Session) -> None:
    """A reply's "prompt N tokens" made before the newest compaction of ``session`` counted a
    context that is gone (the meter shows the one now): ``prompt_before`` names that
    compaction, so the label says so, as the meter does with its estimate."""
    if not any(item["row"].provider_prompt_tokens for item in items):
        return
    made = (
        Compaction.objects.committed()
        .filter(result_session=session, finished_at__isnull=False)
        .order_by("-finished_at")
        .only("finished_at", "tokens_after")
        .first()
    )
    if made is None:
        return
    for item in items:
        row = item["row"]
        if row.provider_prompt_tokens and row.created_at <= made.finished_at:
            item["prompt_before"] = made


def _chat_notices(request: HtmxHttpRequest, compaction_words: str) -> list:
    """The flash messages shown next to the status row, without one that repeats the status
    row's own sentence (an undo or redo is said once, not twice)."""
    return [
        message
        for message in flash.get_messages(request)
        if "chat-near" in message.tags
        and not (message.level == flash.SUCCESS and str(message) == compaction_words)
    ]


def _turn_rows(turn: AgentTurn) -> list[Message]:
    ids = list((turn.usage or {}).get("message_ids") or [])
    if turn.queued_text and turn.user_message_id:
        ids.insert(0, turn.user_message_id)  # a queued message shows inside its own turn
    return list(Message.objects.filter(pk__in=ids).order_by("position")) if ids else []


def _turn_context(turn: AgentTurn) -> dict:
    """Everything the turn partial shows: its rows so far, the streamed text, its state."""
    blocked = None
    if turn.status == AgentTurn.Status.QUEUED and not turn.queued_text:
        blocked = Compaction.objects.in_progress().filter(session_id=turn.session_id).first()
    overflow = (turn.usage or {}).get("overflow")
    return {
        "turn": turn,
        "turn_items": chat_items(_turn_rows(turn)),
        "turn_blocked_by": blocked,
        "turn_active": turn.status in (AgentTurn.Status.QUEUED, AgentTurn.Status.RUNNING),
        "turn_model_label": model_label(turn.model),
        # Streaming Markdown goes through the very function the final reply goes through.
        "turn_partial_html": render_markdown(turn.partial_content) if turn.partial_content else "",
        "turn_overflow": overflow,
    }


def _hidden_ids(turns: list[AgentTurn]) -> set[int]:
    hidden: set[int] = set()
    for turn in turns:
        hidden.update((turn.usage or {}).get("message_ids") or [])
        if turn.queued_text and turn.user_message_id:
            hidden.add(turn.user_message_id)
    return hidden


def _window(session: Session, hidden: set[int], before: int | None = None):
    """The newest TRANSCRIPT_LIMIT active rows (before a position), and the position to ask
    for the page before them (None when they reach the start)."""
    rows = Message.objects.filter(session=session, active=True).exclude(pk__in=hidden)
    if before is not None:
        rows = rows.filter(position__lt=before)
    page = list(rows.order_by("-position")[: TRANSCRIPT_LIMIT + 1])
    more = len(page) > TRANSCRIPT_LIMIT
    page = page[:TRANSCRIPT_LIMIT][::-1]
    return page, (page[0].position if more and page else None)


def _still_last(turn: AgentTurn, session: Session) -> bool:
    """Whether nothing was written to the session after this ended turn. Its box shows its rows
    at the end of the chat; once other rows follow (carried over by an undo, or written by a
    compaction), they stay in the transcript where they are instead of moving to the end."""
    own = list((turn.usage or {}).get("message_ids") or [])
    if turn.user_message_id:
        own.append(turn.user_message_id)
    ended = turn.finished_at or turn.created_at
    later = Message.objects.filter(session=session, active=True, created_at__gt=ended)
    return not later.exclude(pk__in=own).exists()


def _page_context(request: HtmxHttpRequest, session: Session, **extra) -> dict:
    turns = active_turns(session) if not session.end_reason else []
    if not turns:
        last = AgentTurn.objects.filter(session=session).order_by("-created_at").first()
        shown = (AgentTurn.Status.FAILED, AgentTurn.Status.STOPPED)
        # The last turn stays in view when it ended badly or recovered from an overflow.
        said = last is not None and (last.status in shown or (last.usage or {}).get("overflow"))
        turns = [last] if last is not None and said and _still_last(last, session) else []
    rows, earlier_before = _window(session, _hidden_ids(turns))
    archived = None
    if earlier_before is None:  # the start of the active rows is on the page
        archived = _archived_turns(session)
    continued_from = None
    if session.parent_id:
        continued_from = Session.objects.filter(pk=session.parent_id).only("public_id").first()
    continued_in = _continued_in(session)
    compaction = latest_compaction(session)
    compaction_words = compaction_outcome(compaction) if compaction else ""
    items = _items(rows, session)
    regenerable = regenerable_reply(session) if not turns or not _active(turns) else None
    for item in items:
        item["regenerate"] = regenerable is not None and item["row"].pk == regenerable.pk
    context = {
        "nav": "chat",
        "session": session,
        "chains": chat_chains(request.user),
        "draft_key": session.root.public_id if session.root is not None else session.public_id,
        "items": items,
        "earlier_before": earlier_before,
        "archived": archived,
        "turns": [_turn_context(t) for t in turns],
        "meter": context_meter(session),
        "compaction": compaction,
        "compaction_words": compaction_words,
        "chat_notices": _chat_notices(request, compaction_words),
        "undo": undo_state(compaction) if not session.end_reason else {},
        "model_label": model_label(session.model),
        "continued_from": continued_from,
        "continued_in": continued_in if continued_in and continued_in.pk != session.pk else None,
        "draft": "",
    }
    context.update(extra)
    return context


@require_GET
@login_required
def chat(request: HtmxHttpRequest) -> HttpResponse:
    return render(
        request, TEMPLATE, {"nav": "chat", "session": None, "chains": chat_chains(request.user)}
    )


@require_POST
@login_required
def chat_new(request: HtmxHttpRequest) -> HttpResponse:
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


TITLE_MAX_CHARS = 200  # Session.title's column
BUSY_TURNS = (AgentTurn.Status.QUEUED, AgentTurn.Status.RUNNING)
ARCHIVED_SHOWN = 200  # archived rows shown in the chat; the conversation page has them all


def _archived_turns(session: Session) -> dict | None:
    """The rows in-place compactions archived in this session, for the collapsed "N earlier
    turns archived — show" block at the top of the chat (None when there are none)."""
    archived = Message.objects.filter(session=session, archived=True)
    count = archived.count()
    if not count:
        return None
    rows = list(archived.order_by("-position")[:ARCHIVED_SHOWN])[::-1]
    items = chat_items(rows)
    _mark_old_prompts(items, session)
    return {
        "count": count,
        "turns": archived.filter(role=Message.Role.USER).count(),
        "items": items,
        "more": count - len(rows),
    }


def _continued_in(session: Session) -> Session | None:
    """The live session this one's conversation goes on in (a rotation child, or the parent
    an undo reopened), or None for a live session."""
    if session.is_rotated:
        return resolve_tip(session)
    if session.end_reason == Session.EndReason.UNDONE and session.parent_id:
        return resolve_tip(Session.objects.get(pk=session.parent_id))
    return None


@require_GET
@login_required
def chat_detail(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """A chat page. The URL of a session that continued elsewhere (a rotation, an undo)
    redirects to the live one, so a bookmark or a reload lands where the conversation goes
    on; ``?history=1`` shows it read-only, with a link forward (the live session's "earlier
    session" link); the live session links back to the one it continues."""
    session = _session_for(request, public_id)
    if request.GET.get("history") != "1":
        live = _continued_in(session)
        if live is not None and live.pk != session.pk:
            return redirect("chat_detail", public_id=live.public_id)
    return render(request, TEMPLATE, _page_context(request, session))


@require_GET
@login_required
def chat_earlier(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """The page of messages before ``?before=<position>`` (the "earlier messages" link)."""
    session = _session_for(request, public_id)
    try:
        before = int(request.GET.get("before", ""))
    except ValueError:
        before = None
    if before is None or not 0 <= before < 2**31:
        return HttpResponse("before must be a message position", status=400)
    if not request.htmx:
        return redirect(reverse("conversation_detail", args=[session.public_id]))
    turns = active_turns(session)
    rows, earlier_before = _window(session, _hidden_ids(turns), before)
    return render(
        request,
        TEMPLATE + "#earlier",
        {"session": session, "items": _items(rows, session), "earlier_before": earlier_before},
    )


def _refuse(
    request: HtmxHttpRequest, session: Session, message: str, status: int, draft: str = ""
) -> HttpResponse:
    """A refusal in words. The text stays: htmx leaves the box alone, and the plain form
    page puts it back in the box."""
    if request.htmx:
        response = render(request, TEMPLATE + "#composer-error", {"error": message}, status=status)
        return reswap(retarget(response, "#composer-error"), "outerHTML")
    return render(
        request,
        TEMPLATE,
        _page_context(request, session, error=message, draft=draft),
        status=status,
    )


def _command(request: HtmxHttpRequest, session: Session, text: str) -> HttpResponse:
    name, _, argument = text[1:].partition(" ")
    name = name.lower()
    run = None
    try:
        if name == "compress":
            run = compress(session=session, user=request.user, focus=argument)
        elif name == "mode":
            value = set_mode(session=resolve_tip(session), mode=argument or "")
            flash.success(
                request,
                f"Compaction mode for this chat: {'in-place' if value == 'in_place' else value}"
                + (
                    " (a compaction archives the older rows in this chat, behind “show”)."
                    if value == "in_place"
                    else " (a compaction continues the chat in a new session)."
                ),
                extra_tags="chat-near",
            )
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
    tip = resolve_tip(session)
    if run is not None and request.htmx:
        # The status row follows the run to its end (no banner left behind saying "queued").
        response = render(
            request,
            TEMPLATE + "#compaction-status",
            {"compaction": run, "session": tip, "compaction_words": compaction_outcome(run)},
        )
        return reswap(retarget(response, "#compaction-status"), "outerHTML")
    if request.htmx:
        return HttpResponseClientRefresh()
    return redirect("chat_detail", public_id=tip.public_id)


@require_POST
@login_required
def chat_send(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
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
            text,
        )
    if "\x00" in text:
        return _refuse(request, session, NUL_MESSAGE, 400, text.replace("\x00", ""))
    if text.startswith("/"):
        return _command(request, session, text)
    turn = send_message(session=session, text=text)
    if not request.htmx:
        return redirect("chat_detail", public_id=turn.session.public_id)
    if turn.session_id != session.pk:
        # Sent from a page whose session rotated meanwhile: the message went to the live
        # session, and the page goes there too instead of growing the old transcript.
        return HttpResponseClientRedirect(reverse("chat_detail", args=[turn.session.public_id]))
    turn.refresh_from_db()
    user_row = turn.user_message if not turn.queued_text else None
    context = {
        "sent_items": chat_items([user_row]) if user_row else [],
        "session": turn.session,
        "t": _turn_context(turn),
    }
    return render(request, TEMPLATE + "#sent", context)


def _active(turns: list[AgentTurn]) -> bool:
    return any(t.status in (AgentTurn.Status.QUEUED, AgentTurn.Status.RUNNING) for t in turns)


@require_POST
@login_required
def chat_regenerate(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """Write the newest reply again: the old one is archived and a new turn answers the same
    message. Without JavaScript the page reloads at the new turn; with htmx the turn box
    takes the old reply's place in the transcript (its rows removed out of band)."""
    session = _session_for(request, public_id)
    try:
        message_id = int(request.POST.get("message") or "")
    except ValueError:
        message_id = -1
    try:
        turn, gone = regenerate_reply(session=session, message_id=message_id)
    except RegenerateRefused as refused:
        flash.error(request, str(refused), extra_tags="chat-near")
        target = reverse("chat_detail", args=[session.public_id]) + "#chat-notices"
        return HttpResponseClientRedirect(target) if request.htmx else redirect(target)
    if not request.htmx:
        return redirect(reverse("chat_detail", args=[session.public_id]) + "#chat-notices")
    turn.refresh_from_db()
    context = {"sent_items": [], "session": turn.session, "t": _turn_context(turn)}
    response = render(request, TEMPLATE + "#sent", context)
    # The old reply's rows leave the transcript (they stay on the conversation page, archived).
    removed = "".join(f'<div id="msg-{pk}" hx-swap-oob="delete"></div>' for pk in sorted(gone))
    response.content = response.content + removed.encode()
    return response


@require_POST
@login_required
def chat_compress(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    session = _session_for(request, public_id)
    focus = (request.POST.get("focus") or "").strip()
    return _command(request, session, f"/compress {focus}".strip())


@require_POST
@login_required
def chat_turn_stop(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """The Stop button: the turn stops at its next step, keeping what it wrote so far."""
    turn = get_object_or_404(
        AgentTurn.objects.for_user(request.user).select_related("session"), public_id=public_id
    )
    turn = request_stop(turn)
    if not request.htmx:
        return redirect("chat_detail", public_id=resolve_tip(turn.session).public_id)
    return render(request, TURN_TEMPLATE, {"t": _turn_context(turn), "session": turn.session})


def _live_marker(run: Compaction) -> list[dict]:
    """The marker item of an in-place compaction that committed while the page was open."""
    if run.result_session_id is None:
        return []
    row = (
        Message.objects.filter(session_id=run.result_session_id, is_summary=True, active=True)
        .order_by("-position")
        .first()
    )
    if row is None:
        return []
    items = chat_items([row])
    items[0]["compaction"] = run
    return items


@require_GET
@login_required
def chat_turn_status(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    turn = get_object_or_404(
        AgentTurn.objects.for_user(request.user).select_related("session"), public_id=public_id
    )
    if turn.status in (AgentTurn.Status.QUEUED, AgentTurn.Status.RUNNING):
        active_turns(turn.session)  # reaps it if its worker died
        turn.refresh_from_db()
    if not request.htmx:
        return redirect("chat_detail", public_id=resolve_tip(turn.session).public_id)
    context = {"t": _turn_context(turn), "session": turn.session}
    if context["t"]["turn_active"]:
        return render(request, TURN_TEMPLATE, context)
    session = Session.objects.get(pk=turn.session_id)
    overflow = (turn.usage or {}).get("overflow") or {}
    if overflow.get("status") == Compaction.Status.COMMITTED and session.parent_id:
        moved = Compaction.objects.filter(
            public_id=overflow.get("compaction"), result_session=session
        ).exclude(session=session)
        if moved.exists():  # the overflow recovery rotated: the page follows the turn
            return HttpResponseClientRedirect(reverse("chat_detail", args=[session.public_id]))
    live = resolve_tip(session)
    if live.pk != session.pk:
        # A rotation committed while the turn ran or before this poll (an automatic one queued
        # by the turn, say): the page follows it, so the URL, the sidebar and the live
        # session's Undo/Regenerate are those of the session the chat goes on in.
        return HttpResponseClientRedirect(reverse("chat_detail", args=[live.public_id]))
    compaction = latest_compaction(session)
    marker = []
    if (
        compaction is not None
        and compaction.status == Compaction.Status.COMMITTED
        and compaction.result_session_id == session.pk
        and compaction.session_id == session.pk
        and turn.started_at is not None
        and compaction.finished_at
        and compaction.finished_at >= turn.started_at
    ):
        marker = _live_marker(compaction)  # committed in place while this turn ran
    context.update(
        {
            "session": session,
            "meter": context_meter(session),
            "compaction": compaction,
            "compaction_words": compaction_outcome(compaction) if compaction else "",
            "marker_items": marker,
            "oob": True,
        }
    )
    return render(request, TEMPLATE + "#turn-final", context, status=HTMX_STOP_POLLING)


@require_GET
@login_required
def chat_compaction_status(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    run = get_object_or_404(
        Compaction.objects.for_user(request.user).select_related("session", "result_session"),
        public_id=public_id,
    )
    if not request.htmx:
        return redirect("chat_detail", public_id=resolve_tip(run.session).public_id)
    context = {
        "compaction": run,
        "session": run.session,
        "compaction_words": compaction_outcome(run),
    }
    if run.is_finished and run.status == Compaction.Status.COMMITTED:
        if run.result_session_id and run.result_session_id != run.session_id:
            # Rotation: the chat continues in the child session, and the URL follows.
            return HttpResponseClientRedirect(
                reverse("chat_detail", args=[run.result_session.public_id])
            )
        # In place: the marker drops into the transcript and the meter shows the estimate.
        session = run.result_session or run.session
        context.update(
            {
                "session": session,
                "meter": context_meter(session),
                "marker_items": _live_marker(run),
                "oob": True,
            }
        )
        return render(request, TEMPLATE + "#compaction-done", context, status=HTMX_STOP_POLLING)
    status = HTMX_STOP_POLLING if run.is_finished else 200
    return render(request, TEMPLATE + "#compaction-status", context, status=status)


@require_POST
@login_required
def chat_compaction_undo(request: HtmxHttpRequest, public_id: str, action: str) -> HttpResponse:
    """Undo (or redo) a compaction from the chat marker, the status row or the inspector.

    ``carry_over=1`` keeps messages added since (otherwise the refusal says why). Answers
    with a redirect to the conversation's live session, the outcome in a flash message.
    """
    if action not in ("undo", "redo"):
        raise Http404("unknown action")
    run = get_object_or_404(
        Compaction.objects.for_user(request.user).select_related("session"), public_id=public_id
    )
    carry = request.POST.get("carry_over") in ("1", "on", "true")
    apply = undo_compaction if action == "undo" else redo_compaction
    try:
        run = apply(run, user=request.user, carry_over=carry)
    # The outcome shows next to the status row, and the page opens there (#chat-notices),
    # not at the top while the chat scrolls to its newest message.
    except UndoRefused as refused:
        flash.error(request, str(refused), extra_tags="chat-near")
    else:
        flash.success(request, compaction_outcome(run), extra_tags="chat-near")
    live = resolve_tip(Session.objects.get(pk=run.session_id))
    target = reverse("chat_detail", args=[live.public_id]) + "#chat-notices"
    if request.htmx:
        return HttpResponseClientRedirect(target)
    return redirect(target)


def _chain(session: Session):
    """Every session of ``session``'s rotation chain (the chat as the sidebar lists it)."""
    root_id = session.root_id or session.pk
    return Session.objects.filter(owner_id=session.owner_id).filter(
        Q(pk=root_id) | Q(root_id=root_id)
    )


@require_POST
@login_required
def chat_rename(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """Rename a chat: every session of its chain gets the title (the sidebar shows it)."""
    session = _session_for(request, public_id)
    title = " ".join((request.POST.get("title") or "").split())
    live = resolve_tip(session)
    if not title or len(title) > TITLE_MAX_CHARS:
        flash.error(
            request,
            f"Give the chat a title of 1 to {TITLE_MAX_CHARS} characters; it was not renamed.",
            extra_tags="chat-near",
        )
    else:
        _chain(session).update(title=title, updated_at=timezone.now())
        flash.success(request, f"Renamed to “{title}”.", extra_tags="chat-near")
    return redirect(reverse("chat_detail", args=[live.public_id]) + "#chat-notices")


@require_POST
@login_required
def chat_delete(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """Delete a chat: its whole chain, with its messages and compactions. Refused while the
    agent answers or a compaction runs (their workers would write into rows now gone)."""
    session = _session_for(request, public_id)
    chain = _chain(session)
    busy = (
        AgentTurn.objects.filter(session__in=chain, status__in=BUSY_TURNS).exists()
        or Compaction.objects.in_progress().filter(session__in=chain).exists()
    )
    if busy:
        flash.error(
            request,
            "The agent is answering or a compaction is running; stop it or wait, then delete.",
            extra_tags="chat-near",
        )
        live = resolve_tip(session)
        return redirect(reverse("chat_detail", args=[live.public_id]) + "#chat-notices")
    title = session.title or "New chat"
    count = chain.count()
    chain.delete()
    flash.success(
        request, f"Deleted the chat “{title}” ({count} session{'s' if count != 1 else ''})."
    )
    return redirect("chat")
