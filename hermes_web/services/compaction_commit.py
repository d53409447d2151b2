"""Committing a compaction's result: by rotation (a child session) or in place (archive rows).

Each commit is one transaction that checks the run still holds the session's lease and is
still ``running``; otherwise nothing is written (``lost_lease``). Rows that arrived while the
engine ran are carried over after the compacted list, in their order.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone

from hermes_web.models import Compaction, Message, Session
from hermes_web.services.dbretry import db_retry
from hermes_web.services.leases import still_holding

log = logging.getLogger("hermes_web.services.compactions")

Status = Compaction.Status

__all__ = ["commit_in_place", "commit_rotation", "lost_lease"]


def _rows_for(
    session_id: int, messages: list[dict], token_counts, summary_index, first_position: int, now
) -> list[Message]:
    rows = []
    for offset, message in enumerate(messages):
        known = {"role", "content", "tool_calls", "tool_call_id", "name", "tool_name", "reasoning"}
        known |= {"provider_prompt_tokens", "timestamp"}  # timestamp: read by the engine only
        rows.append(
            Message(
                session_id=session_id,
                position=first_position + offset,
                role=message["role"],
                content=message.get("content"),
                tool_calls=message.get("tool_calls") or None,
                tool_call_id=message.get("tool_call_id") or "",
                tool_name=message.get("name") or message.get("tool_name") or "",
                reasoning=message.get("reasoning"),
                token_count=int(token_counts[offset]) if token_counts is not None else 0,
                provider_prompt_tokens=(
                    None if offset == summary_index else message.get("provider_prompt_tokens")
                ),
                is_summary=offset == summary_index,
                extra={k: v for k, v in message.items() if k not in known},
                created_at=now,
            )
        )
    return rows


def _copy_row(row: Message, session_id: int, position: int) -> Message:
    return Message(
        session_id=session_id,
        position=position,
        role=row.role,
        content=row.content,
        tool_calls=row.tool_calls,
        tool_call_id=row.tool_call_id,
        tool_name=row.tool_name,
        reasoning=row.reasoning,
        token_count=row.token_count,
        provider_prompt_tokens=row.provider_prompt_tokens,
        is_summary=row.is_summary,
        extra=row.extra,
        created_at=row.created_at,
    )


@db_retry
def commit_rotation(run, session, result, report, outcome, holder) -> Compaction:
    """End ``session`` and continue it in a child holding the compacted list (one transaction)."""
    now = timezone.now()
    try:
        with transaction.atomic():
            if not still_holding(session.pk, holder):
                return lost_lease(run)
            parent = Session.objects.select_for_update().get(pk=session.pk)
            child = Session.objects.create(
                owner_id=parent.owner_id,
                title=parent.title,
                source=parent.source,
                model=parent.model,
                context_length=parent.context_length,
                compaction_mode=parent.compaction_mode,
                # An endpoint client's continuation is still that client's, before its next
                # request writes the bookkeeping (the lists show the client's name).
                client_name=parent.client_name,
                api_key_id=parent.api_key_id,
                parent=parent,
                root_id=parent.root_id or parent.pk,
                compression_count=parent.compression_count + 1,
                previous_summary=report.get("summary_body") or "",
                extra={"compacted_from": parent.public_id, "compaction": run.public_id},
            )
            rows = _rows_for(
                child.pk,
                result.messages,
                report.get("output_message_tokens"),
                result.summary_index,
                0,
                now,
            )
            # Messages that arrived while the engine ran: kept on the parent and carried over.
            late = Message.objects.filter(
                session_id=parent.pk, active=True, position__gt=run.snapshot_position
            )
            rows += [
                _copy_row(r, child.pk, len(rows) + i)
                for i, r in enumerate(late.order_by("position"))
            ]
            Message.objects.bulk_create(rows, batch_size=500)
            parent.touch(now, ended_at=now, end_reason=Session.EndReason.COMPRESSION)
            # Only a run still "running" commits: if a takeover finished it meanwhile, roll
            # everything back.
            if not Compaction.objects.filter(pk=run.pk, status=Status.RUNNING).update(
                status=Status.COMMITTED, result_session=child, finished_at=now, **outcome
            ):
                raise _Superseded
    except _Superseded:
        return lost_lease(run)
    run.refresh_from_db()
    return run


@db_retry
def commit_in_place(run, session, result, report, outcome, holder) -> Compaction:
    """Archive the compacted rows and append the compacted list after them (one transaction)."""
    now = timezone.now()
    try:
        with transaction.atomic():
            if not still_holding(session.pk, holder):
                return lost_lease(run)
            locked = Session.objects.select_for_update().get(pk=session.pk)
            top = (
                Message.objects.filter(session_id=locked.pk).aggregate(m=Max("position"))["m"] or 0
            )
            Message.objects.filter(
                session_id=locked.pk, active=True, position__lte=run.snapshot_position
            ).update(active=False, archived=True, archived_by=run)
            rows = _rows_for(
                locked.pk,
                result.messages,
                report.get("output_message_tokens"),
                result.summary_index,
                top + 1,
                now,
            )
            Message.objects.bulk_create(rows, batch_size=500)
            # Rows appended during the run move after the compacted list, in their order.
            late = list(
                Message.objects.filter(
                    session_id=locked.pk,
                    active=True,
                    position__gt=run.snapshot_position,
                    position__lte=top,
                ).order_by("position")
            )
            next_position = top + 1 + len(rows)
            for offset, row in enumerate(late):
                row.position = next_position + offset
            Message.objects.bulk_update(late, ["position"], batch_size=500)
            locked.touch(
                now,
                compression_count=F("compression_count") + 1,
                previous_summary=report.get("summary_body") or "",
            )
            # Only a run still "running" commits: if a takeover finished it meanwhile, roll
            # everything back.
            if not Compaction.objects.filter(pk=run.pk, status=Status.RUNNING).update(
                status=Status.COMMITTED, result_session=locked, finished_at=now, **outcome
            ):
                raise _Superseded
    except _Superseded:
        return lost_lease(run)
    run.refresh_from_db()
    return run


class _Superseded(Exception):
    """Raised inside a commit's transaction to roll it back: the run is no longer running."""


def lost_lease(run: Compaction) -> Compaction:
    """The run lost its lease (or was finished by a takeover) before it could commit."""
    log.warning("compaction %s lost its lease before commit; nothing written", run.public_id)
    run.refresh_from_db()
    return run
