"""The chat service: what the chat views and the API call.

Start a chat, take a user's message (stored at once, its turn queued through ``jobs``), stop
a turn, ``/compress`` and ``/mode``, the context meter, the newest compaction seen from the
chat and its outcome in words, and the sidebar's rotation chains. The worker's side (the
turn loop that calls the model and runs tools) is ``hermes_web.agent.loop``.

While a compaction of the session is queued or running, a new turn waits (its task comes back
later) so the compaction never snapshots half a turn; the user's message itself is stored at
once and kept by the compaction's commit.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from hermes_web import jobs
from hermes_web.llm_models import chat_model, context_length_for
from hermes_web.models import AgentTurn, Compaction, Message, Session
from hermes_web.services.compactions import (
    CompactionRefused,
    compaction_config_for,
    in_progress,
    request_compaction,
)
from hermes_web.services.sessions import (
    append_message,
    create_session,
    normalize_mode,
    resolve_tip,
)

__all__ = [
    "ACTIVE",
    "MAX_TOOL_ROUNDS",
    "SYSTEM_PROMPT",
    "ChatBusy",
    "CompactionRefused",
    "active_turn",
    "active_turns",
    "compress",
    "context_meter",
    "latest_compaction",
    "RegenerateRefused",
    "reap_stale_turns",
    "regenerate_reply",
    "regenerable_reply",
    "request_stop",
    "send_message",
    "set_mode",
    "stale_after",
    "start_chat",
]

# Model calls a turn may make with tools before it must answer in words (the turn loop's bound).
MAX_TOOL_ROUNDS = 8
ACTIVE = (AgentTurn.Status.QUEUED, AgentTurn.Status.RUNNING)
SYSTEM_PROMPT = (
    "You are Hermes, a careful software agent working in a project folder (the workspace). "
    "Use the tools to look at files before answering; paths are relative to the workspace. "
    "Answer in Markdown, briefly, citing the files you used."
)


class ChatBusy(Exception):
    """The agent is still answering the previous message of this conversation."""


# -- starting chats and turns -------------------------------------------------------------------


def start_chat(*, owner, title: str = "") -> Session:
    """A new chat session with the system prompt, on the model configured now."""
    model = chat_model()
    session = create_session(
        owner=owner,
        title=title,
        source=Session.Source.CHAT,
        model=model,
        context_length=context_length_for(model),
    )
    append_message(session, role="system", content=SYSTEM_PROMPT)
    return session


def active_turns(session: Session) -> list[AgentTurn]:
    """The queued and running turns of this session (or of the one it rotated from), oldest first.

    A running turn that outlived any real turn is reaped (marked failed) on the way.
    """
    ids = [session.pk] + ([session.parent_id] if session.parent_id else [])
    turns = list(
        AgentTurn.objects.filter(session_id__in=ids, status__in=ACTIVE).order_by("created_at", "pk")
    )
    cutoff = timezone.now() - stale_after()

    def stale(turn: AgentTurn) -> bool:
        started = turn.started_at
        return turn.status == AgentTurn.Status.RUNNING and started is not None and started < cutoff

    # Reaping is a write: it runs only when a running turn has outlived any real turn.
    if any(stale(t) for t in turns):
        reap_stale_turns(ids)
        turns = [t for t in turns if not stale(t)]
    return turns


def active_turn(session: Session) -> AgentTurn | None:
    """The oldest queued or running turn of this session (or of the one it rotated from)."""
    turns = active_turns(session)
    return turns[0] if turns else None


TITLE_CHARS = 80


def chat_title(text: str) -> str:
    """A chat's automatic title: its first message on one line, cut at a word before
    ``TITLE_CHARS`` with an ellipsis (a cut word read as a typo in the sidebar)."""
    line = " ".join(text.split())
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[: TITLE_CHARS - 1]
    space = cut.rfind(" ")
    if space >= TITLE_CHARS // 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:-") + "…"


def send_message(*, session: Session, text: str) -> AgentTurn:
    """Store the user's message on the live session and queue the turn that answers it.

    With no turn in flight the message becomes a user row at once and its turn is queued.
    While another turn is queued or running, the text is stored on a new queued turn instead
    (shown as "queued"): it becomes a user row when that turn starts, after the replies before
    it, so every message is answered in the order it was sent. Nothing is ever refused here.
    """
    with transaction.atomic():
        # Locked and re-read: a rotation committing right now must not strand the message
        # on the session it just ended.
        tip = Session.objects.select_for_update().get(pk=session.pk)
        while tip.is_rotated:
            child = resolve_tip(tip)
            if child.pk == tip.pk:
                break
            tip = Session.objects.select_for_update().get(pk=child.pk)
        ahead = active_turn(tip)
        if not tip.title:
            title = chat_title(text)
            Session.objects.filter(pk=tip.pk, title="").touch(title=title)
            tip.title = title
        if ahead is not None:
            turn = AgentTurn.objects.create(session=tip, queued_text=text, model=chat_model())
        else:
            message = append_message(tip, role="user", content=text)
            turn = AgentTurn.objects.create(session=tip, user_message=message, model=chat_model())
        jobs.queue_agent_turn(turn.pk)
    return turn


class RegenerateRefused(Exception):
    """The reply cannot be written again now; the message says why in words."""


def _last_exchange(session: Session) -> tuple[Message | None, list[Message]]:
    """The newest user message of the live session and the active rows after it (its reply)."""
    question = (
        Message.objects.filter(session=session, active=True, role=Message.Role.USER)
        .order_by("-position")
        .first()
    )
    if question is None:
        return None, []
    after = list(
        Message.objects.filter(
            session=session, active=True, position__gt=question.position
        ).order_by("position")
    )
    return question, after


def regenerable_reply(session: Session) -> Message | None:
    """The reply "Regenerate" may replace: the newest assistant message with words, when it
    answers the newest user message, nothing is in flight, and no compaction summary lies
    between them (a compacted reply is part of the summary, not a reply to take back)."""
    if session.end_reason or active_turns(session):
        return None
    question, after = _last_exchange(session)
    if question is None or not after or any(r.is_summary for r in after):
        return None
    last = after[-1]
    if last.role != Message.Role.ASSISTANT or not (last.content or "").strip():
        return None
    return last


def regenerate_reply(*, session: Session, message_id: int) -> tuple[AgentTurn, list[int]]:
    """Answer the newest user message again: its reply (with the tool calls and results of
    that turn) is archived, not deleted (the conversation page's archived rows keep it), and
    a new turn answering the same message is queued. Returns the turn and the archived rows'
    ids (the chat takes them out of its transcript)."""
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        reply = regenerable_reply(locked)
        if reply is None or reply.pk != message_id:
            raise RegenerateRefused(
                "Only the newest reply can be regenerated, once it has finished; "
                "this one is not the newest any more."
            )
        question, after = _last_exchange(locked)
        assert question is not None  # regenerable_reply found it
        for row in after:
            row.active, row.archived = False, True
            row.extra = {**(row.extra or {}), "regenerated_at": timezone.now().isoformat()}
        Message.objects.bulk_update(after, ["active", "archived", "extra"])
        locked.touch(timezone.now())
        turn = AgentTurn.objects.create(session=locked, user_message=question, model=chat_model())
        jobs.queue_agent_turn(turn.pk)
    return turn, [row.pk for row in after]


def request_stop(turn: AgentTurn) -> AgentTurn:
    """Ask a turn to stop. A queued one stops at once (its text is kept on the row); a running
    one stops at its next write: the reply so far is kept and marked stopped, and a tool call
    already announced gets a result saying it was not run, so no call is left unanswered.
    """
    AgentTurn.objects.filter(pk=turn.pk, status__in=ACTIVE).update(stop_requested=True)
    AgentTurn.objects.filter(pk=turn.pk, status=AgentTurn.Status.QUEUED).update(
        status=AgentTurn.Status.STOPPED, finished_at=timezone.now()
    )
    turn.refresh_from_db()
    return turn


def stale_after() -> timedelta:
    """How long a running turn may run before it counts as dead (its worker stopped)."""
    # A turn is at most MAX_TOOL_ROUNDS + 1 model calls plus tools; past that its worker died.
    return timedelta(seconds=settings.HERMES_LLM_TIMEOUT * (MAX_TOOL_ROUNDS + 2) + 120)


def reap_stale_turns(session_ids: list[int]) -> None:
    """Mark failed the running turns of these sessions whose worker died (see stale_after)."""
    AgentTurn.objects.filter(
        session_id__in=session_ids,
        status=AgentTurn.Status.RUNNING,
        started_at__lt=timezone.now() - stale_after(),
    ).update(
        status=AgentTurn.Status.FAILED,
        error_kind="other",
        finished_at=timezone.now(),
        error="The worker running this reply stopped before it finished. Your message is kept; send it again.",
    )


# -- the context meter --------------------------------------------------------------------------


def context_meter(session: Session, *, points: int = 24) -> dict[str, Any]:
    """Where the context stands: provider prompt tokens per model call, the trigger threshold
    and the window, and warnings in words.

    After a committed compaction, and until a model call reports again, the latest figure is
    the compaction's counted estimate (older provider counts describe a context that no
    longer exists). Warns when the threshold is at or above the window (compaction would only
    start once the window is full) and when the last compaction left the context over the
    threshold or the window, linking the compaction's inspector page.
    """
    window = session.context_length
    threshold = compaction_config_for(session).threshold_tokens
    calls = list(
        Message.objects.filter(
            session_id=session.pk, active=True, provider_prompt_tokens__isnull=False
        )
        .order_by("-position")
        .values_list("provider_prompt_tokens", "created_at")[:points]
    )[::-1]
    values = [v for v, _ in calls]
    made = (
        Compaction.objects.committed()
        .filter(result_session=session)
        .order_by("-finished_at")
        .only("public_id", "tokens_after", "finished_at")
        .first()
    )
    latest = values[-1] if values else None
    estimate = False
    if made is not None and made.tokens_after is not None:
        since = [v for v, at in calls if made.finished_at is None or at > made.finished_at]
        if not since:
            latest, estimate = made.tokens_after, True
    scale = max([window, threshold, *values, latest or 0]) or 1
    warnings: list[dict[str, str]] = []
    if threshold >= window:
        warnings.append(
            {
                "code": "threshold_at_window",
                "message": (
                    f"The threshold ({threshold:,}) is at or above the window ({window:,}): "
                    "automatic compaction would only start once the window is already full."
                ),
                "link": "",
            }
        )
    if made is not None and made.tokens_after is not None:
        link = f"/compactions/{made.public_id}/"
        if made.tokens_after >= window:
            warnings.append(
                {
                    "code": "over_window",
                    "message": (
                        f"The last compaction left {made.tokens_after:,} tokens, over the "
                        f"window of {window:,}: the next call may be refused."
                    ),
                    "link": link,
                }
            )
        elif made.tokens_after >= threshold:
            warnings.append(
                {
                    "code": "over_threshold",
                    "message": (
                        f"The last compaction left {made.tokens_after:,} tokens, still over "
                        f"the threshold of {threshold:,}."
                    ),
                    "link": link,
                }
            )
    return {
        "estimate": estimate,
        "window": window,
        "threshold": threshold,
        "latest": latest,
        "latest_pct": round(100 * latest / scale, 1) if latest is not None else 0,
        "threshold_pct": round(100 * threshold / scale, 1),
        "window_pct": round(100 * window / scale, 1),
        "over": latest is not None and latest >= threshold,
        "over_window": latest is not None and latest >= window,
        "warnings": warnings,
        "bars": [
            {"tokens": v, "pct": round(100 * v / scale, 1), "over": v >= threshold} for v in values
        ],
    }


# -- compactions seen from the chat -------------------------------------------------------------


def latest_compaction(session: Session) -> Compaction | None:
    """The newest compaction of this session, or the one that produced it (rotation child)."""
    return (
        Compaction.objects.real()
        .filter(Q(session=session) | Q(result_session=session))
        .select_related("session", "result_session")
        .order_by("-queued_at", "-pk")
        .first()
    )


def compress(*, session: Session, user, focus: str = "") -> Compaction:
    """``/compress [focus]``: a forced compaction of the live session, now in a worker.

    Raises ChatBusy while the agent is answering (a snapshot must not cut a turn in half) and
    CompactionRefused (from the service) when the session cannot be compacted.
    """
    tip = resolve_tip(Session.objects.get(pk=session.pk))
    if active_turn(tip) is not None:
        raise ChatBusy("the agent is still answering; compress once it has replied")
    running = in_progress(tip)
    if running is not None:
        return running
    return request_compaction(
        session=tip, requested_by=user, trigger=Compaction.Trigger.MANUAL, focus=focus.strip()
    )


def set_mode(*, session: Session, mode: str) -> str:
    """``/mode rotation|in-place`` for this chat; returns the stored value. ValueError if unknown."""
    value = normalize_mode(mode.strip().lower())
    Session.objects.filter(pk=session.pk).touch(compaction_mode=value)
    session.compaction_mode = value
    return value
