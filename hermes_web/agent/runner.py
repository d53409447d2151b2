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

import functools
import json
import logging
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hermes_web.agent import DEMO_CONTEXT_LENGTH, DEMO_MODEL, is_demo_model
from hermes_web.agent.tools import run_tool, tool_schemas
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
DEFAULT_CONTEXT_LENGTH = 128_000
ACTIVE = (AgentTurn.Status.QUEUED, AgentTurn.Status.RUNNING)
SYSTEM_PROMPT = (
    "You are Hermes, a careful software agent working in a project folder (the workspace). "
    "Use the tools to look at files before answering; paths are relative to the workspace. "
    "Answer in Markdown, briefly, citing the files you used."
)


class ChatBusy(Exception):
    """The agent is still answering the previous message of this conversation."""


# -- models -------------------------------------------------------------------------------------


def chat_model() -> str:
    """The configured litellm model, or the offline demo model when none is configured."""
    return settings.HERMES_CHAT_MODEL or DEMO_MODEL


@functools.cache
def _model_map() -> dict[str, Any]:
    # Read litellm's bundled map directly: importing litellm costs seconds in a web process.
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return {}
    path = Path(spec.origin).parent / "model_prices_and_context_window_backup.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def context_length_for(model: str) -> int:
    """The window: demo 64K; else HERMES_CONTEXT_LENGTH; else litellm's model map; else 128K."""
    if is_demo_model(model):
        return DEMO_CONTEXT_LENGTH
    if settings.HERMES_CONTEXT_LENGTH:
        return settings.HERMES_CONTEXT_LENGTH
    table = _model_map()
    for key in (model, model.split("/", 1)[-1]):
        info = table.get(key) or {}
        window = info.get("max_input_tokens") or info.get("max_tokens")
        if isinstance(window, int) and window > 0:
            return window
    return DEFAULT_CONTEXT_LENGTH


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


def active_turn(session: Session) -> AgentTurn | None:
    """The queued or running turn of this session (or of the one it rotated from)."""
    ids = [session.pk] + ([session.parent_id] if session.parent_id else [])
    turns = list(
        AgentTurn.objects.filter(session_id__in=ids, status__in=ACTIVE).order_by("created_at")
    )
    cutoff = timezone.now() - stale_after()

    def stale(turn: AgentTurn) -> bool:
        started = turn.started_at
        return turn.status == AgentTurn.Status.RUNNING and started is not None and started < cutoff

    # Reaping is a write: it runs only when a running turn has outlived any real turn.
    if any(stale(t) for t in turns):
        reap_stale_turns(ids)
        turns = [t for t in turns if not stale(t)]
    return turns[0] if turns else None


def send_message(*, session: Session, text: str) -> AgentTurn:
    """Store the user's message on the live session and queue the turn that answers it.

    A message that arrives while the turn is still waiting (a compaction is running) joins
    that turn; while a turn is already running, ChatBusy is raised and nothing is stored.
    """
    with transaction.atomic():
        # Locked and re-read: a rotation committing right now must not strand the message
        # on the session it just ended.
        tip = Session.objects.select_for_update().get(pk=session.pk)
        while tip.end_reason == "compression":
            child = resolve_tip(tip)
            if child.pk == tip.pk:
                break
            tip = Session.objects.select_for_update().get(pk=child.pk)
        waiting = active_turn(tip)
        if waiting is not None and waiting.status == AgentTurn.Status.RUNNING:
            raise ChatBusy(
                "the agent is still answering your previous message; send this once it has replied"
            )
        message = append_message(tip, role="user", content=text)
        if not tip.title:
            title = " ".join(text.split())[:80]
            Session.objects.filter(pk=tip.pk, title="").update(title=title)
            tip.title = title
        if waiting is not None:
            return waiting
        turn = AgentTurn.objects.create(session=tip, user_message=message, model=chat_model())
        from hermes_web.tasks import enqueue_on_commit, run_agent_turn

        enqueue_on_commit(run_agent_turn, turn.pk)
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
    return (
        Compaction.objects.filter(
            session_id__in=session_ids,
            status__in=(Compaction.Status.QUEUED, Compaction.Status.RUNNING),
        )
        .exclude(trigger=Compaction.Trigger.WHAT_IF)
        .first()
    )


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
        if (
            AgentTurn.objects.filter(session_id__in=ids, status=AgentTurn.Status.RUNNING)
            .exclude(pk=turn.pk)
            .exists()
        ):
            return 1.0
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
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


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

    def run(self) -> None:
        tools = tool_schemas()
        for round_number in range(MAX_TOOL_ROUNDS + 1):
            final = round_number == MAX_TOOL_ROUNDS
            text, calls, reasoning, usage = self.call_model(
                openai_messages(self.session), tools, final=final
            )
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
            self.record(assistant, partial="")
            if not calls:
                break
            for call in calls:
                name = call["function"]["name"]
                self.record(None, activity=f"running {name}")
                result = run_tool(name, call["function"]["arguments"], session=self.session)
                self.usage["tool_calls"] += 1
                message = append_message(
                    self.session,
                    role="tool",
                    content=result,
                    tool_call_id=call["id"],
                    tool_name=name,
                )
                self.record(message, activity="")
        # Queue a compaction (if due) before the turn is marked done, so a message sent right
        # after the reply already finds it in progress and its turn waits for it.
        self.usage.pop("activity", None)
        maybe_auto_compact(
            Session.objects.get(pk=self.session.pk), prompt_tokens=self.usage["prompt_tokens"]
        )
        AgentTurn.objects.filter(pk=self.turn.pk).update(
            status=AgentTurn.Status.DONE,
            usage=self.usage,
            partial_content="",
            finished_at=timezone.now(),
        )

    def record(
        self, message: Message | None, *, partial: str | None = None, activity: str | None = None
    ) -> None:
        if message is not None:
            self.usage["message_ids"].append(message.pk)
        if activity is not None:
            self.usage["activity"] = activity
        fields: dict[str, Any] = {"usage": self.usage}
        if partial is not None:
            fields["partial_content"] = partial
        AgentTurn.objects.filter(pk=self.turn.pk).update(**fields)

    def call_model(
        self, messages: list[dict], tools: list[dict], *, final: bool
    ) -> tuple[str, list[dict], str, dict]:
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
        if is_demo_model(self.model):
            from hermes_web.agent.demo_model import register

            register()
        else:
            if settings.HERMES_CHAT_API_BASE:
                kwargs["api_base"] = settings.HERMES_CHAT_API_BASE
            if settings.HERMES_CHAT_API_KEY:
                kwargs["api_key"] = settings.HERMES_CHAT_API_KEY
            elif settings.HERMES_CHAT_API_BASE:
                # Local OpenAI-compatible servers rarely want a key, but the OpenAI client
                # refuses to send a request without one.
                kwargs["api_key"] = "no-key-needed"
        text, reasoning = "", ""
        calls: dict[int, dict] = {}
        usage: dict[str, Any] = {}
        last_flush = time.monotonic()
        flushed = ""
        try:
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
                    AgentTurn.objects.filter(pk=self.turn.pk).update(partial_content=text)
                    flushed, last_flush = text, time.monotonic()
        except Exception as exc:
            kind, message = classify_error(exc, self.model)
            if kind is None:
                raise
            raise ModelCallFailed(kind, message) from exc
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
    """Provider prompt tokens per model call vs the trigger threshold vs the window."""
    window = session.context_length
    threshold = compaction_config_for(session).threshold_tokens
    values = list(
        Message.objects.filter(session_id=session.pk, provider_prompt_tokens__isnull=False)
        .order_by("-position")
        .values_list("provider_prompt_tokens", flat=True)[:points]
    )[::-1]
    estimate = None
    if not values:
        # Right after a compaction no model call has reported yet: show the counted size.
        made = (
            Compaction.objects.filter(result_session=session, status=Compaction.Status.COMMITTED)
            .order_by("-finished_at")
            .values_list("tokens_after", flat=True)
            .first()
        )
        estimate = made
    scale = max([window, threshold, *values, estimate or 0]) or 1
    latest = values[-1] if values else estimate
    return {
        "estimate": estimate is not None and not values,
        "window": window,
        "threshold": threshold,
        "latest": latest,
        "latest_pct": round(100 * latest / scale, 1) if latest is not None else 0,
        "threshold_pct": round(100 * threshold / scale, 1),
        "window_pct": round(100 * window / scale, 1),
        "over": latest is not None and latest >= threshold,
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
