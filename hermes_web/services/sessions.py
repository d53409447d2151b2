"""Conversations: create, append, read in provider format, follow rotation chains."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Count, Max, Q, Sum
from django.utils import timezone

from compaction import CompactionConfig, count_message_tokens
from hermes_web.caching import SESSION_STATS_SECONDS, session_stats_key
from hermes_web.llm_models import context_length_for
from hermes_web.models import Message, Session

DEFAULT_TOKEN_MODEL = "gpt-4o-mini"
ROLES = frozenset(Message.Role.values)


def token_model(session: Session) -> str:
    """The model whose tokenizer counts this session's messages (unknown names fall back in the engine)."""
    return token_model_for(session.model)


def token_model_for(model: str) -> str:
    """``token_model`` of a session whose model is ``model`` (one not created yet)."""
    return model or settings.HERMES_CHAT_MODEL or DEFAULT_TOKEN_MODEL


def compaction_config_for(session: Session, overrides: dict | None = None) -> CompactionConfig:
    """The session's config (window and tokenizer model) plus overrides.

    Raises:
        compaction.ConfigError: (a ValueError) naming the bad override field.
    """
    values: dict[str, Any] = {
        "context_length": session.context_length,
        "model": token_model(session),
    }
    values.update(overrides or {})
    return CompactionConfig.from_dict(values)


def create_session(
    *,
    owner,
    title: str = "",
    source: str = Session.Source.CHAT,
    model: str = "",
    context_length: int | None = None,
    compaction_mode: str = "",
) -> Session:
    """A new root session (its ``root`` is itself)."""
    session = Session.objects.create(
        owner=owner,
        title=title[:200],
        source=source,
        model=model,
        context_length=context_length or context_length_for(model),
        compaction_mode=normalize_mode(compaction_mode) if compaction_mode else "",
    )
    Session.objects.filter(pk=session.pk).update(root=session)
    session.root = session
    return session


def normalize_mode(mode: str) -> str:
    """``rotation`` / ``in_place`` (``in-place`` accepted); ValueError otherwise."""
    value = (mode or "").replace("-", "_")
    if value not in Session.Mode.values:
        raise ValueError(f"mode must be rotation or in_place, got {mode!r}")
    return value


def append_message(
    session: Session,
    *,
    role: str,
    content: Any,
    tool_calls: list | None = None,
    tool_call_id: str = "",
    tool_name: str = "",
    reasoning: Any = None,
    provider_prompt_tokens: int | None = None,
    extra: dict | None = None,
    is_summary: bool = False,
) -> Message:
    """Append one message at the next position; tokens are counted once, here.

    Concurrent appends to one session serialize on the session row (``select_for_update``
    on PostgreSQL; SQLite's IMMEDIATE transactions already take the write lock at BEGIN).
    If a rotation ended ``session`` after the caller picked it (the commit copied the
    parent's rows before this append could lock it), the message goes to the live
    continuation instead; ``message.session_id`` says where it landed.
    """
    (message,) = append_messages(
        session,
        [
            {
                "role": role,
                "content": content,
                "tool_calls": tool_calls,
                "tool_call_id": tool_call_id,
                "tool_name": tool_name,
                "reasoning": reasoning,
                "provider_prompt_tokens": provider_prompt_tokens,
                "extra": extra,
                "is_summary": is_summary,
            }
        ],
    )
    return message


# What an item of ``append_messages`` may hold: the engine's columns, the row's own fields
# and a count taken beforehand (``count_items``).
APPEND_FIELDS = frozenset(Message.ENGINE_COLUMNS) | {
    "provider_prompt_tokens",
    "extra",
    "is_summary",
    "counted",
}


def _engine_dict(item: dict[str, Any]) -> dict[str, Any]:
    return Message.engine_dict(
        role=item["role"],
        content=item.get("content"),
        tool_calls=item.get("tool_calls"),
        tool_call_id=item.get("tool_call_id") or "",
        tool_name=item.get("tool_name") or "",
        reasoning=item.get("reasoning"),
    )


def count_items(items: list[dict[str, Any]], model: str) -> None:
    """Count the tokens of ``append_messages`` items now, under ``model``'s tokenizer (each
    item keeps its count with the model's name: a session counted by another model is
    counted again when stored).

    For a caller that appends inside a transaction of its own: on SQLite the write lock is
    held from the transaction's first statement to its commit, and every other writer
    waits that long; tokenizing a long tool output (or a new conversation's whole history)
    belongs before it."""
    config = CompactionConfig(model=model)
    for item in items:
        if item.get("role") in ROLES:
            item["counted"] = (model, count_message_tokens(_engine_dict(item), config))


def append_messages(session: Session, items: list[dict[str, Any]]) -> list[Message]:
    """Append several messages at consecutive positions in one transaction, with one lock,
    one position lookup, one INSERT and one ``touch`` (what ``append_message`` does once).

    Each item holds ``append_message``'s keyword arguments. All of them land on the same
    session: ``session``, or its live continuation when a rotation ended it first.
    """
    rows = []
    for item in items:
        unknown = set(item) - APPEND_FIELDS
        if unknown:
            raise TypeError(f"unexpected message fields {sorted(unknown)}")
        role = item["role"]
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r} (expected one of {', '.join(sorted(ROLES))})")
        rows.append(item)
    if not rows:
        return []
    # Counted outside the transaction: tokenizing a long tool output must not hold the lock
    # (a caller inside a transaction of its own counts before it: ``count_items``).
    model = token_model(session)
    config = CompactionConfig(model=model)
    tokens = [
        counted[1]
        if (counted := item.get("counted")) and counted[0] == model
        else count_message_tokens(_engine_dict(item), config)
        for item in rows
    ]
    with transaction.atomic():
        target_id = session.pk
        seen = {target_id}
        while True:
            end_reason = (
                Session.objects.select_for_update()
                .filter(pk=target_id)
                .values_list("end_reason", flat=True)
                .first()
            )
            if end_reason != Session.EndReason.COMPRESSION:
                break
            child_id = (
                Session.objects.filter(parent_id=target_id)
                .order_by("-created_at", "-pk")
                .values_list("pk", flat=True)
                .first()
            )
            if child_id is None or child_id in seen:
                break
            seen.add(child_id)
            target_id = child_id
        # A query of its own, after the lock: on PostgreSQL a subquery in the locking SELECT
        # would read the snapshot taken before the lock wait and miss the append it waited for.
        last = Message.objects.filter(session_id=target_id).aggregate(m=Max("position"))["m"]
        first = 0 if last is None else last + 1
        messages = Message.objects.bulk_create(
            [
                Message(
                    session_id=target_id,
                    position=first + offset,
                    role=item["role"],
                    content=item.get("content"),
                    tool_calls=item.get("tool_calls") or None,
                    tool_call_id=item.get("tool_call_id") or "",
                    tool_name=item.get("tool_name") or "",
                    reasoning=item.get("reasoning"),
                    token_count=count,
                    provider_prompt_tokens=item.get("provider_prompt_tokens"),
                    is_summary=bool(item.get("is_summary")),
                    extra=item.get("extra") or {},
                )
                for offset, (item, count) in enumerate(zip(rows, tokens, strict=True))
            ]
        )
        now = timezone.now()
        Session.objects.filter(pk=target_id).touch(now)
    if target_id == session.pk:
        session.updated_at = now  # what touch() would set on the instance
    return messages


def conversation_stats(session: Session) -> dict[str, int | None]:
    """The header numbers of a conversation: active messages ``n``, their ``tokens`` and the
    ``biggest`` message, and the ``archived`` count.

    One pass over the session's rows, cached under the session's ``updated_at``: every write
    to a session's rows (append, in-place commit) moves it, as the conversation page's cached
    message chunks already rely on.
    """
    key = session_stats_key(session)
    stats = cache.get(key)
    if stats is None:
        active = Q(active=True)
        stats = Message.objects.filter(session=session).aggregate(
            n=Count("pk", filter=active),
            tokens=Sum("token_count", filter=active),
            biggest=Max("token_count", filter=active),
            archived=Count("pk", filter=Q(archived=True)),
        )
        cache.set(key, stats, SESSION_STATS_SECONDS)
    return stats


def openai_messages(session: Session) -> list[dict]:
    """The active conversation, in order, as the engine and providers take it."""
    # Plain tuples, not model instances: this runs before every model call of a chat turn.
    rows = (
        Message.objects.filter(session_id=session.pk, active=True)
        .order_by("position")
        .values_list(*Message.PROMPT_COLUMNS)  # an agent's summary wrapped as ours are
    )
    return [Message.engine_dict(*row) for row in rows]


def resolve_tip(session: Session) -> Session:
    """The live session of a rotation chain: follows children while the parent rotated."""
    seen = {session.pk}
    while session.is_rotated:
        child = Session.objects.filter(parent_id=session.pk).order_by("-created_at", "-pk").first()
        if child is None or child.pk in seen:
            break
        seen.add(child.pk)
        session = child
    return session


def lineage_root(session: Session) -> Session:
    root = session.root if session.root_id and session.root_id != session.pk else None
    return root if root is not None else session


def session_tree(root_session: Session) -> list[Session]:
    """Every session of the chain that ``root_session`` belongs to, oldest first."""
    root = lineage_root(root_session)
    return list(
        Session.objects.filter(Q(pk=root.pk) | Q(root_id=root.pk), owner_id=root.owner_id).order_by(
            "created_at", "pk"
        )
    )


def max_upload_bytes() -> int:
    return settings.HERMES_MAX_UPLOAD_BYTES
