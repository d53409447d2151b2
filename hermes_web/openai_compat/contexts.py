"""The stored context of compacted API sessions, kept per process between requests.

Once a session has a committed compaction, every request of its client is answered from the
session's active rows (head + summary + tail + what was appended since), not from the
client's own history. Reading and decoding those rows on every request costs time that grows
with the conversation; an agent sends a request per tool call, and between two of them the
session only gained the rows this process stored for the previous one.

So the rows read are kept, per session, with the version they are valid for: the session's
``updated_at`` (every writer of a session's rows bumps it with ``Session.touch``) and the
latest committed compaction. A request whose session still has that version reuses them; one
whose session changed in any other way (a compaction committed or undone, a regenerated
reply, another process's request, a fork) reads the rows again. When ``service.store``
appends to the session it checked under the session's row lock that the version was still
the one the context was read at, so it records its own write as the new version and the next
request reads only the rows after the last one known (``appended``).

Only the reuse of a read is cached, never a decision: a context whose version differs in any
way is read anew, whole.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from compaction import validate_tool_pairs
from hermes_web.models import Compaction, Message, Session
from hermes_web.openai_compat.bounded import BoundedCache

COLUMNS = (*Message.ENGINE_COLUMNS, "position")


@dataclass(frozen=True)
class StoredContext:
    """A compacted session's active rows as the engine reads them, as of ``version``."""

    session_pk: int
    compaction_pk: int
    version: datetime  # the session's updated_at these rows are valid for
    chain: tuple[int, ...]  # the session and its rotation ancestors (where is_error is kept)
    messages: tuple[dict, ...]  # openai_messages(session), in order
    last_position: int  # the position of the last row read
    results: frozenset[str]  # the tool_call_id of every tool result in messages
    calls: frozenset[str]  # the id of every tool call in messages
    failed: frozenset[str]  # the results the chain's rows mark is_error
    chars: int  # characters of content held (what the cache may hold is bounded)
    paired: bool  # every tool call has its result right after it (validate_tool_pairs)
    # Rows after last_position were appended at ``version`` by this process: read them next.
    unread: bool = False


def _chars(messages: tuple[dict, ...]) -> int:
    return sum(
        len(content) if isinstance(content, str) else len(repr(content)) if content else 0
        for content in (message.get("content") for message in messages)
    )


def _chain(session: Session) -> tuple[int, ...]:
    chain: list[int] = []
    current: Session | None = session
    while current is not None and current.pk not in chain:
        chain.append(current.pk)
        current = current.parent
    return tuple(chain)


def _failed(chain: tuple[int, ...], results: set[str] | frozenset[str]) -> frozenset[str]:
    """Of ``results``, the tool call ids whose row in the chain kept Anthropic's is_error."""
    if not results:
        return frozenset()
    return frozenset(
        Message.objects.filter(
            session_id__in=chain, role="tool", tool_call_id__in=results, extra__is_error=True
        ).values_list("tool_call_id", flat=True)
    )


def _call_ids(messages: tuple[dict, ...] | list[dict]) -> frozenset[str]:
    return frozenset(
        call.get("id") or ""
        for message in messages
        for call in message.get("tool_calls") or ()
        if isinstance(call, dict)
    )


def _result_ids(messages: tuple[dict, ...] | list[dict]) -> frozenset[str]:
    return frozenset(m.get("tool_call_id") or "" for m in messages if m["role"] == "tool")


def _rows(session: Session, after: int = -1) -> tuple[tuple[dict, ...], int]:
    rows = (
        Message.objects.filter(session_id=session.pk, active=True, position__gt=after)
        .order_by("position")
        .values_list(*COLUMNS)
    )
    messages, last = [], after
    for *columns, position in rows:
        messages.append(Message.engine_dict(*columns))
        last = position
    return tuple(messages), last


def read(session: Session, compaction: Compaction) -> StoredContext:
    """The stored context of ``session`` (fresh from the database, as a request reads it)
    whose latest committed compaction is ``compaction``."""
    messages, last = _rows(session)
    chain = _chain(session)
    results = _result_ids(messages)
    return StoredContext(
        session_pk=session.pk,
        compaction_pk=compaction.pk,
        version=session.updated_at,
        chain=chain,
        messages=messages,
        last_position=last,
        results=results,
        calls=_call_ids(messages),
        failed=_failed(chain, results),
        chars=_chars(messages),
        paired=not validate_tool_pairs(messages),
    )


def _read_appended(context: StoredContext, session: Session) -> StoredContext:
    """``context`` with the rows appended after its last one (by this process's store)."""
    added, last = _rows(session, context.last_position)
    results = _result_ids(added)
    return replace(
        context,
        messages=context.messages + added,
        last_position=last,
        results=context.results | results,
        calls=context.calls | _call_ids(added),
        failed=context.failed | _failed(context.chain, results),
        chars=context.chars + _chars(added),
        # Nothing pending at the end of a paired context: what follows is paired alone.
        paired=not validate_tool_pairs(added if context.paired else context.messages + added),
        unread=False,
    )


class StoredContexts:
    """The newest compacted sessions' contexts, at most ``size`` of them and ``max_chars``
    characters of content in all."""

    def __init__(self, size: int = 64, max_chars: int = 32_000_000) -> None:
        self._entries: BoundedCache[int, StoredContext] = BoundedCache(size, max_chars)

    def get(self, session: Session, compaction: Compaction) -> StoredContext:
        """``session``'s stored context: the one kept when the session still has its version
        (and the rows this process appended since, read), else read anew."""
        context = self._entries.get(session.pk)
        if (
            context is None
            or context.compaction_pk != compaction.pk
            or context.version != session.updated_at
        ):
            context = read(session, compaction)
        elif context.unread:
            context = _read_appended(context, session)
        else:
            return context
        self._entries.put(session.pk, context, context.chars)
        return context

    def appended(self, context: StoredContext, version: datetime) -> None:
        """``service.store`` appended rows to ``context``'s session (and wrote nothing else),
        having checked under the session's lock that it still had ``context.version``; the
        session's version is now ``version``."""

        def advanced(kept: StoredContext) -> StoredContext | None:
            if kept.version != context.version:
                return None  # replaced meanwhile: the next request reads anew
            return replace(kept, version=version, unread=True)

        self._entries.update(context.session_pk, advanced)


CONTEXTS = StoredContexts()
