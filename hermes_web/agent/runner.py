"""The chat side: start chats, take a user's message, and run the agent turn loop.

A turn: load exactly the session's active conversation (after a compaction that is head +
summary + tail), stream one model call through litellm (writing the text so far to
``AgentTurn.partial_content`` about every 100 ms), store the assistant message with the
provider's ``usage.prompt_tokens``, run its tool calls and store their results, and go round
again until the model answers with text. Then ``maybe_auto_compact`` decides whether a
compaction job is due.

While a compaction of the session is queued or running, a new turn waits (its task comes back
later) so the compaction never snapshots half a turn; the user's message itself is stored at
once and kept by the compaction's commit.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from hermes_web import jobs
from hermes_web.agent.provider import chat_provider_kwargs
from hermes_web.agent.tools import run_tool, tool_schemas, workspace_for
from hermes_web.llm_models import chat_model, context_length_for
from hermes_web.models import AgentTurn, Compaction, Message, Session
from hermes_web.services.compactions import compaction_config_for, maybe_auto_compact
from hermes_web.services.sessions import (
    append_message,
    create_session,
    openai_messages,
    resolve_tip,
)

log = logging.getLogger(__name__)

MAX_TOOL_ROUNDS = 8
FLUSH_SECONDS = 0.1
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
            title = " ".join(text.split())[:80]
            Session.objects.filter(pk=tip.pk, title="").update(title=title)
            tip.title = title
        if ahead is not None:
            turn = AgentTurn.objects.create(session=tip, queued_text=text, model=chat_model())
        else:
            message = append_message(tip, role="user", content=text)
            turn = AgentTurn.objects.create(session=tip, user_message=message, model=chat_model())
        jobs.queue_agent_turn(turn.pk)
    return turn


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
    # A turn is at most MAX_TOOL_ROUNDS + 1 model calls plus tools; past that its worker died.
    return timedelta(seconds=settings.HERMES_LLM_TIMEOUT * (MAX_TOOL_ROUNDS + 2) + 120)


def reap_stale_turns(session_ids: list[int]) -> None:
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


# -- running a turn -----------------------------------------------------------------------------


def _blocking_compaction(session_ids: list[int]) -> Compaction | None:
    return Compaction.objects.in_progress().filter(session_id__in=session_ids).first()


def _eager() -> bool:
    from hermes_web.celery import app

    return bool(app.conf.task_always_eager)


def run_turn(turn_id: int) -> float | None:
    """Run one queued turn to its end. Returns seconds to wait before trying again, or None.

    Idempotent: a finished or already running turn is left alone.
    """
    turn = AgentTurn.objects.select_related("session").filter(pk=turn_id).first()
    if turn is None or turn.status != AgentTurn.Status.QUEUED:
        return None
    session = resolve_tip(turn.session)
    ids = list({turn.session_id, session.pk})
    waited = (timezone.now() - turn.created_at).total_seconds()
    if not _eager() and waited < settings.HERMES_LOCK_LEASE_SECONDS:
        # Compactions run in their own tasks; a turn started now would be snapshotted half-done.
        if _blocking_compaction(ids) is not None:
            return 1.0
        # Answered in order: wait while a turn runs or an older one is still queued.
        ahead = Q(status=AgentTurn.Status.RUNNING) | Q(
            status=AgentTurn.Status.QUEUED, pk__lt=turn.pk
        )
        if AgentTurn.objects.filter(ahead, session_id__in=ids).exclude(pk=turn.pk).exists():
            return 0.5
    claim = {
        "status": AgentTurn.Status.RUNNING,
        "started_at": timezone.now(),
        "session": session,
        "model": chat_model(),
    }
    if not AgentTurn.objects.filter(pk=turn.pk, status=AgentTurn.Status.QUEUED).update(**claim):
        return None
    for field, value in claim.items():
        setattr(turn, field, value)
    if turn.queued_text and turn.user_message_id is None:
        # A queued message joins the conversation now, after the replies sent before it.
        message = append_message(session, role="user", content=turn.queued_text)
        AgentTurn.objects.filter(pk=turn.pk).update(user_message=message)
        turn.user_message = message
    try:
        TurnLoop(turn, session).run()
    except ModelCallFailed as failure:
        _fail(turn, failure.kind, failure.message)
    except Exception as exc:  # never leave a turn "running" behind a crash; the page shows why
        log.exception("agent turn %s crashed", turn.public_id)
        _fail(
            turn,
            "other",
            f"The agent stopped on an internal error ({type(exc).__name__}). Your message is kept.",
        )
    return None


def _fail(turn: AgentTurn, kind: str, message: str) -> None:
    AgentTurn.objects.filter(pk=turn.pk).update(
        status=AgentTurn.Status.FAILED,
        error_kind=kind,
        error=message[:1000],
        partial_content="",
        finished_at=timezone.now(),
    )


class ModelCallFailed(Exception):
    """A provider error, classified for people (``kind`` is AgentTurn.error_kind)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class TurnStopped(Exception):
    """The user pressed Stop while the model was streaming; ``partial`` is the text so far."""

    def __init__(self, partial: str) -> None:
        super().__init__("stopped")
        self.partial = partial


# -- context overflow ---------------------------------------------------------------------------

OVERFLOW_WORDS = (
    "context length",
    "context_length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
)


def is_context_overflow(exc: BaseException) -> bool:
    """True when a provider refused a request for being longer than the model's window.

    litellm's ContextWindowExceededError, any HTTP 413, or a 400 whose message names the
    context length; the exception's cause chain is searched too (ModelCallFailed wraps it).
    """
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 5:
        seen += 1
        if type(current).__name__ == "ContextWindowExceededError":
            return True
        status = getattr(current, "status_code", None)
        if status == 413:
            return True
        if status == 400:
            text = str(getattr(current, "message", None) or current).lower()
            if any(word in text for word in OVERFLOW_WORDS):
                return True
        current = current.__cause__
    return False


def compact_for_overflow(session: Session) -> Compaction:
    """Compact ``session`` now, in this process, forced (the anti-thrash rule does not apply:
    the provider has just said the conversation no longer fits). Returns the finished run."""
    from hermes_web.services.compactions import CompactionRefused, request_compaction

    try:
        return request_compaction(session=session, trigger=Compaction.Trigger.MANUAL, run_now=True)
    except CompactionRefused:
        return Compaction(session=session, status=Compaction.Status.SKIPPED, reason="ended")


def call_with_overflow_recovery(
    session: Session,
    call,
    *,
    on_compacted=None,
):
    """Call the model on the session's active conversation, recovering once from an overflow.

    ``call(messages)`` makes one model call with the session's OpenAI-format messages and
    returns whatever it likes. When it raises a context-overflow error (see
    ``is_context_overflow``: litellm's ContextWindowExceededError, HTTP 413, or a 400 naming
    the context length), the session is compacted at once (``compact_for_overflow``:
    forced, bypassing anti-thrash), ``on_compacted(run, live_session)`` is told, and ``call``
    runs once more on the compacted conversation (on the rotation child when the mode is
    rotation). If the compaction does not commit, or the retry overflows again, the error of
    the last call is raised unchanged.

    Returns ``(result, live_session)``. Shared by the chat turn loop and any other caller of
    the model that keeps its history in a Session (the OpenAI-compatible endpoint).
    """
    try:
        return call(openai_messages(session)), session
    except Exception as exc:
        if not is_context_overflow(exc):
            raise
        run = compact_for_overflow(session)
        committed = run.status == Compaction.Status.COMMITTED
        live = Session.objects.get(pk=run.result_session_id or session.pk) if committed else None
        if on_compacted is not None:
            on_compacted(run, exc, live)
        if live is None:
            raise
        return call(openai_messages(live)), live


class TurnLoop:
    """Model call → tools → model call … → text reply, for one claimed turn."""

    def __init__(self, turn: AgentTurn, session: Session) -> None:
        self.turn = turn
        self.session = session
        self.model = turn.model or chat_model()
        self.usage: dict[str, Any] = {
            "prompt_tokens": None,
            "completion_tokens": 0,
            "rounds": 0,
            "tool_calls": 0,
            "message_ids": [],
        }

    def compacted(self, run: Compaction, error: BaseException, live: Session | None) -> None:
        """Overflow recovery hook: say so on the turn, and follow a rotation to its child."""
        self.usage["overflow"] = {
            "compaction": run.public_id if run.pk else "",
            "status": run.status,
            "reason": run.reason or "",
            "tokens_before": run.tokens_before,
            "tokens_after": run.tokens_after,
            "error": _short(error),
        }
        if live is not None and live.pk != self.session.pk:
            # The rows so far were copied into the child: the page shows them from there.
            self.session = live
            self.usage["message_ids"] = []
            AgentTurn.objects.filter(pk=self.turn.pk).update(session=live)
        self.record(None)

    def run(self) -> None:
        tools = tool_schemas()
        for round_number in range(MAX_TOOL_ROUNDS + 1):
            final = round_number == MAX_TOOL_ROUNDS
            try:
                (text, calls, reasoning, usage), self.session = call_with_overflow_recovery(
                    self.session,
                    lambda messages, final=final: self.call_model(messages, tools, final=final),
                    on_compacted=self.compacted,
                )
            except TurnStopped as stop:
                if stop.partial:
                    message = append_message(
                        self.session,
                        role="assistant",
                        content=stop.partial,
                        extra={"model": self.model, "turn": self.turn.public_id, "stopped": True},
                    )
                    self.record(message)
                self.finish(AgentTurn.Status.STOPPED)
                return
            except Exception as exc:
                kind, message = classify_error(exc, self.model)
                if kind is None:
                    raise
                if is_context_overflow(exc) and self.usage.get("overflow"):
                    message += " Compacting the conversation at once did not make it fit."
                raise ModelCallFailed(kind, message) from exc
            self.usage["rounds"] += 1
            prompt_tokens = usage.get("prompt_tokens")
            if prompt_tokens is not None:
                self.usage["prompt_tokens"] = prompt_tokens
            self.usage["completion_tokens"] += usage.get("completion_tokens") or 0
            assistant = append_message(
                self.session,
                role="assistant",
                content=text if (text or not calls) else None,
                tool_calls=calls or None,
                reasoning=reasoning or None,
                provider_prompt_tokens=prompt_tokens,
                extra={"model": self.model, "turn": self.turn.public_id},
            )
            live = self.record(assistant, partial="")
            if not calls:
                break
            for call in calls:
                name = call["function"]["name"]
                if live:
                    live = self.record(None, activity=f"running {name}")
                if live:
                    result = run_tool(
                        name,
                        call["function"]["arguments"],
                        workspace=workspace_for(self.session),
                        session=self.session,
                    )
                    self.usage["tool_calls"] += 1
                else:
                    # Every announced call gets its result, so the conversation stays valid.
                    result = json.dumps({"error": "not run: the user stopped this turn"})
                message = append_message(
                    self.session,
                    role="tool",
                    content=result,
                    tool_call_id=call["id"],
                    tool_name=name,
                )
                live = self.record(message, activity="") and live
            if not live:
                self.finish(AgentTurn.Status.STOPPED)
                return
        # Queue a compaction (if due) before the turn is marked done, so a message sent right
        # after the reply already finds it in progress and its turn waits for it.
        maybe_auto_compact(
            Session.objects.get(pk=self.session.pk), prompt_tokens=self.usage["prompt_tokens"]
        )
        self.finish(AgentTurn.Status.DONE)

    def finish(self, status: str) -> None:
        self.usage.pop("activity", None)
        if status == AgentTurn.Status.STOPPED:
            self.usage["stopped"] = True
        AgentTurn.objects.filter(pk=self.turn.pk).update(
            status=status,
            usage=self.usage,
            partial_content="",
            finished_at=timezone.now(),
        )

    def record(
        self, message: Message | None, *, partial: str | None = None, activity: str | None = None
    ) -> bool:
        """Save progress on the turn row; False once Stop was pressed (progress still saved)."""
        if message is not None:
            self.usage["message_ids"].append(message.pk)
        if activity is not None:
            self.usage["activity"] = activity
        fields: dict[str, Any] = {"usage": self.usage}
        if partial is not None:
            fields["partial_content"] = partial
        # The stop flag rides on the write the loop makes anyway: no extra query per step.
        if AgentTurn.objects.filter(pk=self.turn.pk, stop_requested=False).update(**fields):
            return True
        AgentTurn.objects.filter(pk=self.turn.pk).update(**fields)
        return False

    def call_model(
        self, messages: list[dict], tools: list[dict], *, final: bool
    ) -> tuple[str, list[dict], str, dict]:
        """One streamed model call. Raises the provider's exception as is, or TurnStopped."""
        import litellm

        litellm.suppress_debug_info = True
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            "timeout": settings.HERMES_LLM_TIMEOUT,
            "max_retries": settings.HERMES_LLM_MAX_RETRIES,
            "num_retries": 0,
        }
        if tools:
            kwargs["tools"] = tools
            if final:  # out of tool rounds: ask for words
                kwargs["tool_choice"] = "none"
        kwargs.update(chat_provider_kwargs(self.model))
        text, reasoning = "", ""
        calls: dict[int, dict] = {}
        usage: dict[str, Any] = {}
        last_flush = time.monotonic()
        flushed = ""
        for chunk in litellm.completion(**kwargs):
            chunk_usage = getattr(chunk, "usage", None)
            if chunk_usage:
                usage = {
                    "prompt_tokens": getattr(chunk_usage, "prompt_tokens", None),
                    "completion_tokens": getattr(chunk_usage, "completion_tokens", None),
                }
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta is None:
                continue
            if delta.content:
                text += delta.content
            thinking = getattr(delta, "reasoning_content", None)
            if thinking:
                reasoning += thinking
            for piece in getattr(delta, "tool_calls", None) or []:
                _merge_call(calls, piece)
            if text != flushed and time.monotonic() - last_flush >= FLUSH_SECONDS:
                # The stop flag rides on the flush: a stopped turn keeps the text so far
                # and drops any half-streamed tool call.
                if not AgentTurn.objects.filter(pk=self.turn.pk, stop_requested=False).update(
                    partial_content=text
                ):
                    raise TurnStopped(text)
                flushed, last_flush = text, time.monotonic()
        ordered = [calls[i] for i in sorted(calls)]
        for call in ordered:
            call["id"] = call["id"] or f"call_{self.turn.public_id[:8]}_{len(ordered)}"
            call["function"]["arguments"] = call["function"]["arguments"] or "{}"
        return text, ordered, reasoning, usage


def _merge_call(calls: dict[int, dict], piece: Any) -> None:
    index = getattr(piece, "index", None) or 0
    slot = calls.setdefault(
        index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
    )
    if getattr(piece, "id", None):
        slot["id"] = piece.id
    function = getattr(piece, "function", None)
    if function is not None:
        if getattr(function, "name", None) and not slot["function"]["name"]:
            slot["function"]["name"] = function.name
        if getattr(function, "arguments", None):
            slot["function"]["arguments"] += function.arguments


def classify_error(exc: Exception, model: str) -> tuple[str | None, str]:
    """(error_kind, a message for people) for a provider error; (None, "") for our own bugs."""
    import litellm

    where = settings.HERMES_CHAT_API_BASE or "the provider"
    if isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError):
        return "auth", (
            f"The model provider refused the credentials for {model} "
            f"({getattr(exc, 'status_code', 401)}). Check HERMES_CHAT_API_KEY."
        )
    if isinstance(exc, litellm.RateLimitError):
        return (
            "rate_limit",
            f"The model provider is rate limiting {model} (429). Wait a moment and send again.",
        )
    if isinstance(exc, litellm.Timeout):
        return (
            "timeout",
            f"{model} did not answer within {settings.HERMES_LLM_TIMEOUT} s (HERMES_LLM_TIMEOUT).",
        )
    if isinstance(exc, litellm.APIConnectionError) or "connection error" in str(exc).lower():
        return "connection", f"Could not reach {model} at {where}. Is the server running?"
    if isinstance(
        exc, litellm.BadRequestError | litellm.NotFoundError | litellm.UnprocessableEntityError
    ):
        return (
            "bad_request",
            f"{model} rejected the request ({getattr(exc, 'status_code', 400)}): {_short(exc)}",
        )
    if isinstance(
        exc, litellm.APIError | litellm.InternalServerError | litellm.ServiceUnavailableError
    ):
        return "other", f"{model} failed ({getattr(exc, 'status_code', '?')}): {_short(exc)}"
    if type(exc).__module__.startswith(("litellm", "openai", "httpx")):
        return "other", f"The call to {model} failed: {_short(exc)}"
    return None, ""


def _short(exc: Exception) -> str:
    text = " ".join(str(getattr(exc, "message", None) or exc).split())
    return text[:300]


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
    from django.db.models import Q

    return (
        Compaction.objects.filter(Q(session=session) | Q(result_session=session))
        .exclude(trigger=Compaction.Trigger.WHAT_IF)
        .select_related("session", "result_session")
        .order_by("-queued_at", "-pk")
        .first()
    )


def compress(*, session: Session, user, focus: str = "") -> Compaction:
    """``/compress [focus]``: a forced compaction of the live session, now in a worker.

    Raises ChatBusy while the agent is answering (a snapshot must not cut a turn in half) and
    CompactionRefused (from the service) when the session cannot be compacted.
    """
    from hermes_web.services.compactions import in_progress, request_compaction

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
    from hermes_web.services.sessions import normalize_mode

    value = normalize_mode(mode.strip().lower())
    Session.objects.filter(pk=session.pk).update(compaction_mode=value)
    session.compaction_mode = value
    return value


# -- words for people ---------------------------------------------------------------------------


def compaction_outcome(run: Compaction) -> str:
    """What a compaction run did or why it did not, in a sentence (never a raw reason code)."""
    config = run.config or {}
    tail = config.get("tail_token_budget")
    head = config.get("protect_first_n")
    status = run.status
    if status == Compaction.Status.QUEUED:
        return "Queued: waiting for a worker to pick it up."
    if status == Compaction.Status.RUNNING:
        return "Running: summarizing the middle of the conversation."
    history = ((run.report or {}).get("undo") or {}).get("history") or []
    carried = history[-1].get("carried_messages") if history else 0
    carried_words = f"; {carried:,} later message(s) carried over" if carried else ""
    if status == Compaction.Status.UNDONE:
        return (
            "Undone: the context from before this compaction is restored"
            f"{carried_words}. Redo applies it again."
        )
    if status == Compaction.Status.COMMITTED:
        saved = ""
        if run.tokens_before and run.tokens_after is not None:
            saved = (
                f" {run.tokens_before:,} → {run.tokens_after:,} tokens"
                f" ({100 - round(100 * run.tokens_after / run.tokens_before)} % smaller)."
            )
        where = (
            "the conversation continues in a new session"
            if run.result_session_id and run.result_session_id != run.session_id
            else "older messages were archived in this session"
        )
        redone = " (redone after an undo)" if history else ""
        return f"Done{redone}: {where}{carried_words}.{saved}"
    reason = run.reason or ""
    words = {
        "nothing_to_compact": (
            "Nothing to compact: everything after the first "
            + (f"{head} messages" if head is not None else "messages")
            + " is within the protected tail"
            + (f" of {tail:,} tokens." if tail else ".")
        ),
        "summary_not_smaller": (
            "Not applied: the summary would not have been smaller than the messages it "
            "replaces, so the conversation was left as it was."
        ),
        "ineffective": (
            "Automatic compaction paused: the last compactions each saved too little "
            "(anti-thrash). It tries once more after a 5-minute cool-down; /compress forces "
            "one now."
        ),
        "locked": "Skipped: another compaction of this session was already running.",
        "superseded": "Skipped: this session had already continued in a new session.",
        "summary_auth_error": (
            "Stopped: the summary model refused the credentials; nothing was changed."
        ),
        "summary_failed": "Stopped: the summary could not be written; nothing was changed.",
    }
    if reason in words:
        return words[reason]
    if status == Compaction.Status.FAILED:
        return (
            "Failed: " + (run.error.splitlines()[0][:200] if run.error else "unknown error") + "."
        )
    if reason:
        return f"{run.get_status_display().capitalize()}: {reason.replace('_', ' ')}."
    return run.get_status_display().capitalize() + "."


def chat_chains(user, *, limit: int = 50) -> list[dict[str, Any]]:
    """The sidebar: one entry per rotation chain (its live session first), newest first.

    Each entry: ``tip`` (the live session), ``sessions`` (the chain, latest first),
    ``compactions`` (the chain's compaction count) and ``label``: the title, with the date
    and a short id added when another chain has the same title.
    """
    rows = list(
        Session.objects.for_user(user)
        .filter(source=Session.Source.CHAT)
        .order_by("-updated_at")
        .only(
            "public_id",
            "title",
            "root_id",
            "parent_id",
            "end_reason",
            "compression_count",
            "created_at",
            "updated_at",
        )[: limit * 4]
    )
    return chains_of(rows, limit=limit)


def chains_of(rows, *, limit: int = 50, untitled: str = "Untitled chat") -> list[dict[str, Any]]:
    """Group sessions into rotation chains (the sidebar's and the conversation list's one
    presenter): see ``chat_chains`` for the entries' keys. ``rows`` may carry annotations."""
    chains: dict[int, dict[str, Any]] = {}
    for row in rows:
        key = row.root_id or row.pk
        chain = chains.setdefault(key, {"sessions": [], "tip": None, "compactions": 0})
        chain["sessions"].append(row)
        chain["compactions"] = max(chain["compactions"], row.compression_count)
    entries = []
    for chain in chains.values():
        chain["sessions"].sort(key=lambda s: (s.created_at, s.pk), reverse=True)
        live = [s for s in chain["sessions"] if not s.end_reason]
        chain["tip"] = live[0] if live else chain["sessions"][0]
        chain["updated_at"] = max(s.updated_at for s in chain["sessions"])
        entries.append(chain)
    entries.sort(key=lambda c: c["updated_at"], reverse=True)
    entries = entries[:limit]
    titles: dict[str, int] = {}
    for chain in entries:
        title = chain["tip"].title or untitled
        titles[title] = titles.get(title, 0) + 1
    for chain in entries:
        tip = chain["tip"]
        title = tip.title or untitled
        chain["title"] = title
        chain["disambiguation"] = (
            f"{timezone.localtime(chain['sessions'][-1].created_at):%b %-d, %H:%M} · "
            f"{tip.public_id[:6]}"
            if titles[title] > 1
            else ""
        )
    return entries
