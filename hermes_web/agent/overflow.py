"""Context overflow: know a provider's "too long" refusal, compact at once, call again.

Shared by the chat turn loop and any other caller of the model that keeps its history in a
Session (the OpenAI-compatible endpoint).
"""

from __future__ import annotations

from hermes_web.models import Compaction, Session
from hermes_web.services.compactions import CompactionRefused, request_compaction
from hermes_web.services.sessions import openai_messages

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


def short_error(exc: BaseException) -> str:
    """The error's message on one line, at most 300 characters (for a person to read)."""
    text = " ".join(str(getattr(exc, "message", None) or exc).split())
    return text[:300]
