"""The worker's side of the chat: run one queued agent turn to its end.

A turn: load exactly the session's active conversation (after a compaction that is head +
summary + tail), stream one model call through litellm (writing the text so far to
``AgentTurn.partial_content`` about every 100 ms), store the assistant message with the
provider's ``usage.prompt_tokens``, run its tool calls and store their results, and go round
again until the model answers with text. Then ``maybe_auto_compact`` decides whether a
compaction job is due. A provider error is told to people in words
(``describe_model_call_error``); a context overflow is recovered once (``agent.overflow``).

What the views call (start a chat, send, stop, compress…) is ``hermes_web.services.chat``.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from hermes_web.agent.overflow import call_with_overflow_recovery, is_context_overflow, short_error
from hermes_web.agent.provider import chat_provider_kwargs
from hermes_web.agent.tools import run_tool, tool_schemas, workspace_for
from hermes_web.llm_models import chat_model, litellm_module
from hermes_web.models import AgentTurn, Compaction, Message, Session
from hermes_web.services.chat import MAX_TOOL_ROUNDS
from hermes_web.services.compactions import maybe_auto_compact
from hermes_web.services.sessions import append_message, resolve_tip

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.1

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
            "error": short_error(error),
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
                kind, problem = describe_model_call_error(exc, self.model)
                if kind is None:
                    raise
                if is_context_overflow(exc) and self.usage.get("overflow"):
                    problem += " Compacting the conversation at once did not make it fit."
                raise ModelCallFailed(kind, problem) from exc
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
        litellm = litellm_module()
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


def describe_model_call_error(exc: Exception, model: str) -> tuple[str | None, str]:
    """(AgentTurn.error_kind, a message for people) for a chat-model call's provider error;
    (None, "") for anything that is not the provider's (our own bugs, re-raised)."""
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
            f"{model} rejected the request ({getattr(exc, 'status_code', 400)}): {short_error(exc)}",
        )
    if isinstance(
        exc, litellm.APIError | litellm.InternalServerError | litellm.ServiceUnavailableError
    ):
        return "other", f"{model} failed ({getattr(exc, 'status_code', '?')}): {short_error(exc)}"
    if type(exc).__module__.startswith(("litellm", "openai", "httpx")):
        return "other", f"The call to {model} failed: {short_error(exc)}"
    return None, ""
