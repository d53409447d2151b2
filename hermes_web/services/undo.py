"""Undo a committed compaction (and redo it), restoring exactly the context it replaced.

In place, a commit archived the session's active rows (``archived_by`` = the run) and wrote
the compacted list as new rows (created at the run's ``finished_at``). Undo swaps them back:
the archived rows become active again, the compacted rows are archived; nothing is deleted,
so a redo swaps them once more. By rotation, a commit ended the parent and continued in a
child; undo reopens the parent and ends the child (``end_reason="undone"``); redo does the
opposite. Either way the run's status becomes ``undone`` (and ``committed`` again on redo),
and every undo/redo is appended to ``report["undo"]`` (who, when, rows carried), which the
timeline and tree show.

Messages added after the compaction would be left out of the restored context, so undo is
refused with the reason unless the caller asks to carry them over (in place they simply stay
after the restored rows; by rotation they are copied to the end of the reopened session).
"""

from __future__ import annotations

import html
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Exists, Max
from django.utils import timezone

from hermes_web.models import AgentTurn, Compaction, Message, Session

__all__ = ["UndoRefused", "added_after", "redo_compaction", "undo_compaction", "undo_state"]

ACTIVE_TURNS = (AgentTurn.Status.QUEUED, AgentTurn.Status.RUNNING)


class UndoRefused(Exception):
    """The undo or redo cannot be done now; the message says why in words.

    ``added`` is how many messages would have to be carried over (0 for other reasons).
    """

    def __init__(self, message: str, *, added: int = 0) -> None:
        super().__init__(message)
        self.added = added


def _history(run: Compaction) -> list[dict[str, Any]]:
    return list(((run.report or {}).get("undo") or {}).get("history") or [])


def _since(run: Compaction) -> Any:
    """When the current state began: the last undo/redo, else the commit."""
    history = _history(run)
    if history:
        from django.utils.dateparse import parse_datetime

        return parse_datetime(history[-1]["at"])
    return run.finished_at


def _committed_at(run: Compaction) -> datetime:
    """When the run committed: the rows its commit wrote carry this time."""
    assert run.finished_at is not None  # only finished runs are undone or redone
    return run.finished_at


def _live_session_id(run: Compaction) -> int:
    """The session whose context the user is talking to now, given the run's state."""
    if run.status == Compaction.Status.UNDONE or run.mode == Compaction.Mode.IN_PLACE:
        return run.session_id
    assert run.result_session_id is not None  # a committed rotation has its continuation
    return run.result_session_id


def _added_after(run: Compaction):
    return Message.objects.filter(
        session_id=_live_session_id(run), active=True, created_at__gt=_since(run)
    )


def added_after(run: Compaction) -> list[Message]:
    """Messages written to the live session since the compaction (or its last undo/redo)."""
    return list(_added_after(run).order_by("position"))


def _check(run: Compaction, *, undoing: bool, carry_over: bool) -> list[Message]:
    wanted = Compaction.Status.COMMITTED if undoing else Compaction.Status.UNDONE
    verb = "undo" if undoing else "redo"
    if run.is_native:
        raise UndoRefused(
            f"This is {run.source_label} (imported): it can be replayed and compared, not {verb}ne."
        )
    if run.trigger == Compaction.Trigger.WHAT_IF or run.status != wanted:
        raise UndoRefused(
            f"Only a {'committed' if undoing else 'undone'} compaction can be {verb}ne; "
            f"this one is {run.get_status_display()}."
        )
    if run.result_session_id is None or run.finished_at is None:
        raise UndoRefused("This compaction has no stored result to switch back from.")
    sessions = [run.session_id, run.result_session_id]
    later_runs = (
        Compaction.objects.real()
        .committed()
        .filter(session_id__in=sessions, finished_at__gt=run.finished_at)
        .exclude(pk=run.pk)
    )
    busy = Compaction.objects.in_progress().filter(session_id__in=sessions)
    answering = AgentTurn.objects.filter(session_id__in=sessions, status__in=ACTIVE_TURNS)
    # One round trip for the four refusals (the inspector asks on every view of a run); the
    # added messages are read only when there are some.
    has_later, is_busy, is_answering, has_added = (
        Compaction.objects.filter(pk=run.pk)
        .values_list(Exists(later_runs), Exists(busy), Exists(answering), Exists(_added_after(run)))
        .get()
    )
    if has_later:
        later = later_runs.first()
        assert later is not None
        assert later.finished_at is not None
        raise UndoRefused(
            f"A later compaction ({later.public_id[:8]}, {later.finished_at:%b %d %H:%M}) was "
            f"built on this one; {verb} that one first."
        )
    if is_busy:
        raise UndoRefused(f"A compaction of this conversation is in progress; {verb} after it.")
    if is_answering:
        raise UndoRefused(f"The agent is still answering; {verb} once it has replied.")
    if has_added and not carry_over:
        # A refusal names how many and the newest only: the inspector and the chat page ask
        # on every view, and a long conversation can have thousands of rows after the run.
        newest = _added_after(run).order_by("-position").first()
        if newest is None:  # undone meanwhile: nothing to carry over after all
            return []
        count = _added_after(run).count()
        them = "them" if count != 1 else "it"
        raise UndoRefused(
            f"{count:,} message{'s were' if count != 1 else ' was'} added after "
            f"this compaction (the newest: {newest_in_words(newest)}). "
            f"{verb.capitalize()}ing would leave {them} out of the context; choose to carry "
            f"{them} over to keep {them}.",
            added=count,
        )
    return added_after(run) if has_added else []


def newest_in_words(message: Message, chars: int = 60) -> str:
    """Who wrote a message and how it begins, as a person reads it on the chat page: the
    Markdown rendered to its words (no ``**``, backticks or link syntax), cut at a word."""
    from django.utils.html import strip_tags

    from hermes_web.presenters.chat import render_markdown

    who = {"user": "your message", "assistant": "the reply", "tool": "a tool result"}.get(
        message.role, f"a {message.role} message"
    )
    text = str(message.content or "")
    words = " ".join(html.unescape(strip_tags(render_markdown(text[:2_000]))).split())
    if not words and message.tool_calls:
        names = [str((c.get("function") or {}).get("name") or "") for c in message.tool_calls]
        return f"the reply calling {', '.join(n for n in names if n) or 'a tool'}"
    if not words:
        return who
    if len(words) > chars:
        words = words[: chars + 1].rsplit(" ", 1)[0].rstrip(",;:.") + "…"
    return f"{who} “{words}”"


def _record(run: Compaction, action: str, user, carried: int, now) -> None:
    report = dict(run.report or {})
    undo = dict(report.get("undo") or {})
    history = list(undo.get("history") or [])
    history.append(
        {
            "action": action,
            "at": now.isoformat(),
            "by": getattr(user, "get_username", lambda: "")() if user is not None else "",
            "carried_messages": carried,
        }
    )
    undo["history"] = history
    report["undo"] = undo
    run.report = report


def _copy_to(rows: list[Message], session: Session) -> int:
    top = Message.objects.filter(session=session).aggregate(m=Max("position"))["m"]
    start = -1 if top is None else top
    copies = [
        Message(
            session=session,
            position=start + 1 + i,
            role=r.role,
            content=r.content,
            tool_calls=r.tool_calls,
            tool_call_id=r.tool_call_id,
            tool_name=r.tool_name,
            reasoning=r.reasoning,
            token_count=r.token_count,
            provider_prompt_tokens=r.provider_prompt_tokens,
            extra={**(r.extra or {}), "carried_from": r.session.public_id},
            created_at=r.created_at,
        )
        for i, r in enumerate(rows)
    ]
    Message.objects.bulk_create(copies)
    return len(copies)


def _previous_summary(session: Session, excluding: Compaction) -> str:
    before = (
        Compaction.objects.committed()
        .filter(result_session=session)
        .exclude(pk=excluding.pk)
        .order_by("-finished_at")
        .first()
    )
    return str((before.report or {}).get("summary_body") or "") if before else ""


def undo_compaction(run: Compaction, *, user=None, carry_over: bool = False) -> Compaction:
    """Restore the context ``run`` replaced. Raises UndoRefused with the reason in words."""
    with transaction.atomic():
        run = Compaction.objects.select_for_update().get(pk=run.pk)
        added = _check(run, undoing=True, carry_over=carry_over)
        now = timezone.now()
        if run.mode == Compaction.Mode.IN_PLACE:
            session = Session.objects.select_for_update().get(pk=run.session_id)
            # The rows the commit wrote, then the rows it archived (nothing is deleted).
            Message.objects.filter(
                session=session,
                active=True,
                created_at=_committed_at(run),
                position__gt=run.snapshot_position or 0,
            ).update(active=False, archived=True)
            Message.objects.filter(session=session, archived_by=run).update(
                active=True, archived=False
            )
            session.touch(
                now,
                compression_count=max(0, session.compression_count - 1),
                previous_summary=_previous_summary(session, run),
            )
            carried = len(added)  # they stay where they are: after the restored rows
        else:
            parent = Session.objects.select_for_update().get(pk=run.session_id)
            child = Session.objects.select_for_update().get(pk=run.result_session_id)
            carried = _copy_to(added, parent) if added else 0
            parent.touch(now, ended_at=None, end_reason=Session.EndReason.LIVE)
            child.touch(now, ended_at=now, end_reason=Session.EndReason.UNDONE)
        _record(run, "undo", user, carried, now)
        run.status = Compaction.Status.UNDONE
        run.save(update_fields=["status", "report"])
    return run


def redo_compaction(run: Compaction, *, user=None, carry_over: bool = False) -> Compaction:
    """Apply an undone compaction again (the same result, not a new run)."""
    with transaction.atomic():
        run = Compaction.objects.select_for_update().get(pk=run.pk)
        added = _check(run, undoing=False, carry_over=carry_over)
        now = timezone.now()
        if run.mode == Compaction.Mode.IN_PLACE:
            session = Session.objects.select_for_update().get(pk=run.session_id)
            Message.objects.filter(session=session, archived_by=run).update(
                active=False, archived=True
            )
            Message.objects.filter(
                session=session,
                created_at=_committed_at(run),
                position__gt=run.snapshot_position or 0,
                archived_by__isnull=True,
            ).update(active=True, archived=False)
            session.touch(
                now,
                compression_count=session.compression_count + 1,
                previous_summary=str((run.report or {}).get("summary_body") or ""),
            )
            carried = len(added)
        else:
            parent = Session.objects.select_for_update().get(pk=run.session_id)
            child = Session.objects.select_for_update().get(pk=run.result_session_id)
            carried = _copy_to(added, child) if added else 0
            parent.touch(now, ended_at=now, end_reason=Session.EndReason.COMPRESSION)
            child.touch(now, ended_at=None, end_reason=Session.EndReason.LIVE)
        _record(run, "redo", user, carried, now)
        run.status = Compaction.Status.COMMITTED
        run.save(update_fields=["status", "report"])
    return run


def undo_state(run: Compaction | None) -> dict[str, Any]:
    """For the chat and inspector buttons: can it be undone/redone now, and if not, why."""
    if run is None or run.status not in (Compaction.Status.COMMITTED, Compaction.Status.UNDONE):
        return {"action": "", "reason": "", "added": 0}
    undoing = run.status == Compaction.Status.COMMITTED
    try:
        _check(run, undoing=undoing, carry_over=False)
    except UndoRefused as refused:
        return {
            "action": "undo" if undoing else "redo",
            "reason": str(refused),
            "added": refused.added,
        }
    return {"action": "undo" if undoing else "redo", "reason": "", "added": 0}
