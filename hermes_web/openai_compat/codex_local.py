"""Codex's *local* compaction, seen from the gateway, stored as a compaction.

With a provider it does not compact remotely (any not named OpenAI or Azure), the Codex CLI
summarises by itself: it sends its history through ``/v1/responses`` with one more user
message, its summarization prompt (``PROMPT_OPENING``…), and keeps what the model writes.
Its next request rebuilds the history: the instructions, the user messages it kept, its
context turns again, then one user message ``SUMMARY_PREFIX`` + newline + the summary, then
the new prompt. That request continues no stored session (nothing before it is a prefix).

So, in two steps (``service`` calls them):

1. The summarization request (``is_summarization``) is forwarded as any request, but its
   prompt and the model's summary are not stored as turns of the conversation: the messages
   before the prompt are stored as usual, and a committed rotation of that session is
   recorded (``record``): source Codex, summary = what the model wrote, ``asked_by`` naming
   Codex's local compaction.
2. The request holding that summary (``continued``) starts the rotation's child session
   (``link``): the stored chain goes on in one tree, the summary row is marked as the
   summary, and the model reads the summary because Codex sends it.
"""

from __future__ import annotations

from django.utils import timezone

from compaction.messages import content_text
from hermes_web.models import ApiKey, Compaction, Session
from hermes_web.openai_compat.upstream import Reply
from hermes_web.services.sessions import resolve_tip

# The first sentence of Codex's summarization prompt (codex-rs templates/compact/prompt.md,
# the same in the 0.171.0 binary); the rest lists what the summary should hold.
PROMPT_OPENING = "You are performing a CONTEXT CHECKPOINT COMPACTION."
# What Codex puts before the summary in the user message that carries it (summary_prefix.md).
SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its "
    "thinking process. You also have access to the state of the tools that were used by that "
    "language model. Use this to build on the work that has already been done and avoid "
    "duplicating work. Here is the summary produced by the other language model, use the "
    "information in this summary to assist with your own analysis:"
)
ASKED_WITH = "Codex local compaction (its summarization prompt)"
# How far back a summary is looked for: Codex's pending compactions are the key's newest.
PENDING_LOOKUP = 20


def _user_text(message: dict) -> str:
    if message.get("role") != "user":
        return ""
    return content_text(message.get("content"), images=False).strip()


def is_summarization(messages: list[dict]) -> bool:
    """Whether a request is Codex's summarization turn: its last message is the prompt."""
    return bool(messages) and _user_text(messages[-1]).startswith(PROMPT_OPENING)


def summary_at(messages: list[dict]) -> tuple[int, str] | None:
    """The index and summary text of the last user message carrying Codex's summary."""
    for index in range(len(messages) - 1, -1, -1):
        text = _user_text(messages[index])
        if text.startswith(SUMMARY_PREFIX):
            return index, text[len(SUMMARY_PREFIX) :].strip()
    return None


def record(session: Session, reply: Reply, asked: dict) -> Compaction:
    """A committed rotation of ``session`` (as stored before the prompt) whose summary is
    the one Codex's model wrote (``reply``); its child is made when Codex's next request
    arrives (``link``). ``asked``: the compaction's ``asked_by``."""
    summary = reply.content.strip()
    prompt_tokens = reply.usage.get("prompt_tokens")
    now = timezone.now()
    rows = list(
        session.messages.filter(active=True)
        .order_by("position")
        .values_list("position", "token_count")
    )
    counted = sum(tokens or 0 for _, tokens in rows)
    before = prompt_tokens if prompt_tokens is not None else counted
    return Compaction.objects.create(
        session=session,
        source=Compaction.Source.CODEX,
        mode=Compaction.Mode.ROTATION,
        trigger=Compaction.Trigger.UNKNOWN,  # Codex's auto limit or its /compact: not said
        status=Compaction.Status.COMMITTED,
        summarizer=Compaction.Source.CODEX,
        tokens_before=before,
        native_summary=summary,
        native_record={"via": "/v1/responses", "summary_prefix": SUMMARY_PREFIX},
        snapshot_position=rows[-1][0] if rows else None,
        asked_by=asked,
        report={
            "status": "compacted",
            "summary": summary,
            "summarizer": Compaction.Source.CODEX,
            "profile": "agent:codex",
            "summary_role": "user",
            "boundaries": {"head": [0, 0], "middle": [0, len(rows)], "tail": [len(rows)] * 2},
            "message_tokens": [tokens or 0 for _, tokens in rows],
            "tokens": {"before": before, "middle": counted, "counted_before": counted},
            "counts": {"messages_before": len(rows)},
        },
        queued_at=now,
        started_at=now,
        finished_at=now,
    )


def continued(key: ApiKey, messages: list[dict]) -> tuple[Compaction, int] | None:
    """The Codex compaction a request continues (its summary message carries that run's
    summary, and the run has no continuation yet) and the summary's index, or None."""
    found = summary_at(messages)
    if found is None:
        return None
    index, summary = found
    for run in (
        Compaction.objects.filter(
            session__api_key_id=key.pk,
            source=Compaction.Source.CODEX,
            status=Compaction.Status.COMMITTED,
            result_session__isnull=True,
        )
        .exclude(asked_by={})
        .order_by("-finished_at", "-pk")[:PENDING_LOOKUP]
    ):
        if run.native_summary.strip() == summary:
            return run, index
    return None


def link(run: Compaction, summary_index: int, child: Session) -> None:
    """Make ``child`` (just created for the request holding the summary, in the caller's
    transaction) the continuation of ``run``'s session: the parent ends, the tree goes on.
    A run another request linked meanwhile is left alone (``child`` stays a root)."""
    if (
        Compaction.objects.select_for_update()
        .filter(pk=run.pk, result_session__isnull=True)
        .first()
        is None
    ):
        return
    parent = resolve_tip(Session.objects.select_for_update().get(pk=run.session_id))
    now = timezone.now()
    Session.objects.filter(pk=child.pk).update(
        parent=parent,
        root_id=parent.root_id or parent.pk,
        compression_count=parent.compression_count + 1,
        previous_summary=run.native_summary,
        extra={"compacted_from": parent.public_id, "compaction": run.public_id},
    )
    child.refresh_from_db()
    parent.touch(now, ended_at=now, end_reason=Session.EndReason.COMPRESSION)
    kept = list(
        child.messages.order_by("position").values_list("token_count", flat=True)[
            : summary_index + 1
        ]
    )
    report = dict(run.report or {})
    tokens = dict(report.get("tokens") or {})
    after = sum(t or 0 for t in kept)
    tokens.update(after=after, counted_after=after, summary=kept[-1] if kept else None)
    report.update(
        tokens=tokens,
        summary_index=summary_index,
        counts={**(report.get("counts") or {}), "messages_after": len(kept)},
        output_message_tokens=kept,
    )
    row = child.messages.filter(position=summary_index).first()
    if row is not None:
        row.is_summary = True
        row.extra = {**row.extra, "native_compaction": run.public_id}
        row.save(update_fields=["is_summary", "extra"])
    Compaction.objects.filter(pk=run.pk).update(
        result_session=child, tokens_after=after, report=report
    )
