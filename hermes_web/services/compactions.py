"""Compaction runs: queue, run (lease lock + engine), commit by rotation or in place.

A run's life: ``request_compaction`` stores a queued row and enqueues ``compact_session``
after the transaction commits; ``run_compaction`` (the task body) claims the row, takes the
session's lease, runs the engine outside any transaction, then commits everything in one
transaction, or nothing. The requested summarizer (``auto`` / ``deterministic``) is kept in
``Compaction.summarizer`` until the run replaces it with the one actually used.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from sys import intern
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from compaction import (
    CompactionConfig,
    CompactionOutcome,
    compact,
    should_compact,
)
from hermes_web import jobs
from hermes_web.llm_models import build_summarizer
from hermes_web.models import Compaction, Message, Session, SessionLock
from hermes_web.services.dbretry import TRANSIENT_DB_ERRORS, db_retry
from hermes_web.services.leases import (
    Heartbeat,
    acquire_lock,
    holder_for,
    live_lease_of,
    release_lock,
    still_holding,
)
from hermes_web.services.sessions import normalize_mode, token_model

log = logging.getLogger(__name__)

Status = Compaction.Status
IN_PROGRESS = Compaction.IN_PROGRESS
SUMMARIZER_CHOICES = ("auto", "deterministic")
# After this many claims of one row (workers killed mid-run) it is marked failed.
MAX_ATTEMPTS = 3
# How long the anti-thrash block holds before one automatic attempt is allowed again.
ANTI_THRASH_COOLDOWN = timedelta(seconds=300)
# A running row without a lease is only taken over once it was claimed longer ago than this
# (between its claim and its lease, a live worker holds no lease yet).
CLAIM_GRACE = timedelta(seconds=5)
# Fields whose change makes stored per-message token counts wrong for this run.
_RECOUNT_FIELDS = ("model", "per_message_overhead", "image_tokens")


class CompactionRefused(Exception):
    """A compaction that cannot be requested (e.g. the session already rotated)."""


class CompactionBusy(CompactionRefused):
    """Another (non-dry) run of the session is already queued or running."""

    def __init__(self, running: Compaction | None):
        self.running = running
        what = (
            f"compaction {running.public_id} is already {running.status}"
            if running
            else ("a compaction is already queued or running")
        )
        super().__init__(f"{what} for this session")


# --- configuration ---------------------------------------------------------------------


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


# --- requesting ------------------------------------------------------------------------


def in_progress(session: Session) -> Compaction | None:
    """The queued or running (non-dry-run) compaction of this session, if any."""
    return Compaction.objects.in_progress().filter(session=session).order_by("queued_at").first()


def request_compaction(
    *,
    session: Session,
    requested_by=None,
    trigger: str = Compaction.Trigger.MANUAL,
    mode: str | None = None,
    focus: str = "",
    config_overrides: dict | None = None,
    summarizer: str = "auto",
    run_now: bool = False,
) -> Compaction:
    """Store a queued run and enqueue it after commit (or run it inline with ``run_now``).

    ``trigger="what_if"`` is a dry run: the report is stored, nothing is committed.

    Raises:
        compaction.ConfigError: a bad override (a ValueError naming the field).
        ValueError: an unknown mode, trigger or summarizer.
        CompactionRefused: the session already rotated (compact its live child instead).
    """
    if trigger not in Compaction.Trigger.values:
        raise ValueError(f"unknown trigger {trigger!r}")
    if summarizer not in SUMMARIZER_CHOICES:
        raise ValueError(
            f"summarizer must be one of {', '.join(SUMMARIZER_CHOICES)}, got {summarizer!r}"
        )
    mode = normalize_mode(mode) if mode else session.effective_mode
    config = compaction_config_for(session, config_overrides)
    if trigger != Compaction.Trigger.WHAT_IF and session.is_rotated:
        raise CompactionRefused(
            "this session was already compacted by rotation; compact its continuation"
        )
    try:
        # The partial unique constraint "one_live_compaction_per_session" makes the check
        # atomic: of simultaneous requests exactly one row is inserted.
        with transaction.atomic():
            run = Compaction.objects.create(
                session=session,
                requested_by=requested_by,
                mode=mode,
                trigger=trigger,
                focus=focus or "",
                config=config.to_dict(),
                summarizer=summarizer,
            )
    except IntegrityError as error:
        raise CompactionBusy(in_progress(session)) from error
    if run_now:
        run = run_compaction(run.pk)
        if run.status != Status.QUEUED:
            return run
        # Waiting behind another run's lease: a worker takes it when that run ends.
    jobs.queue_compaction(run.pk)
    return run


def commit_what_if(compaction: Compaction, *, requested_by) -> Compaction:
    """Queue a real manual run with the dry run's config, mode and focus."""
    return request_compaction(
        session=compaction.session,
        requested_by=requested_by,
        trigger=Compaction.Trigger.MANUAL,
        mode=compaction.mode,
        focus=compaction.focus,
        config_overrides=compaction.config,
        summarizer=compaction.summarizer if compaction.summarizer in SUMMARIZER_CHOICES else "auto",
    )


def lineage_history(session: Session) -> list[CompactionOutcome]:
    """Committed compactions of the whole rotation chain, oldest first (anti-thrash input)."""
    rows = (
        Compaction.objects.for_lineage(session)
        .committed()
        .filter(tokens_before__isnull=False, tokens_after__isnull=False)
        .order_by("finished_at", "pk")
        .values_list("tokens_before", "tokens_after")
    )
    return [CompactionOutcome(before, after) for before, after in rows]


def maybe_auto_compact(session: Session, *, prompt_tokens: int | None = None) -> Compaction | None:
    """Called after each chat reply: queue an automatic compaction when the engine says so.

    ``prompt_tokens`` is the provider's count for the latest call, when the caller has it;
    otherwise the newest message that recorded one is read.

    Returns the queued row; or a ``skipped``/``ineffective`` row when the anti-thrash rule
    blocked a crossing of the threshold (recorded once per crossing, so the timeline can
    warn); or None (below the threshold, nothing measured yet, already in progress, ended).
    """
    if session.is_rotated:
        return None
    if prompt_tokens is None:
        prompt_tokens = (
            Message.objects.filter(session_id=session.pk, provider_prompt_tokens__isnull=False)
            .order_by("-position")
            .values_list("provider_prompt_tokens", flat=True)
            .first()
        )
    if prompt_tokens is None:
        return None
    config = compaction_config_for(session)
    # Below the threshold nothing else matters (the anti-thrash rule only judges crossings):
    # most replies stop here, before the queries for runs in progress and the history.
    if prompt_tokens < config.threshold_tokens or in_progress(session) is not None:
        return None
    decision = should_compact(prompt_tokens, config, lineage_history(session))
    if decision.should:
        try:
            return request_compaction(session=session, trigger=Compaction.Trigger.AUTO)
        except CompactionBusy:
            return None  # a run was requested a moment ago, between the check and here
    if decision.reason != "ineffective":
        return None
    latest = Compaction.objects.real().filter(session=session).order_by("-queued_at", "-pk").first()
    if latest is not None and latest.status == Status.SKIPPED and latest.reason == "ineffective":
        # Recovery probe (reference §10.4): once the block has stood for the cool-down, one
        # automatic attempt is allowed; if it is ineffective too, the block comes back at once.
        blocked_for = timezone.now() - (latest.finished_at or timezone.now())
        if blocked_for >= ANTI_THRASH_COOLDOWN:
            return request_compaction(session=session, trigger=Compaction.Trigger.AUTO)
        return None
    now = timezone.now()
    return Compaction.objects.create(
        session=session,
        mode=session.effective_mode,
        trigger=Compaction.Trigger.AUTO,
        config=config.to_dict(),
        status=Status.SKIPPED,
        reason="ineffective",
        provider_prompt_tokens=prompt_tokens,
        report={
            "status": "skipped",
            "reason": "ineffective",
            "tokens": {"threshold": decision.threshold, "provider_prompt_tokens": prompt_tokens},
        },
        started_at=now,
        finished_at=now,
    )


# --- running ---------------------------------------------------------------------------


def mark_failed(compaction_id: int, error: str) -> None:
    """Give up on a run (task out of retries); a finished row is left alone."""
    Compaction(pk=compaction_id).mark_failed(error)


def _claim(run: Compaction) -> bool:
    """queued → running; or re-run a running row whose worker died (its lease is gone)."""
    now = timezone.now()
    if Compaction.objects.filter(pk=run.pk, status=Status.QUEUED).update(
        status=Status.RUNNING, started_at=now, attempts=F("attempts") + 1
    ):
        run.refresh_from_db()
        return True
    run.refresh_from_db()
    if run.status != Status.RUNNING or live_lease_of(run):
        return False  # finished, or another worker is running it right now
    if run.started_at and now - run.started_at < CLAIM_GRACE:
        return False  # claimed a moment ago: its worker is taking the lease right now
    if run.attempts >= MAX_ATTEMPTS:
        run.finish(
            Status.FAILED,
            error=f"gave up after {run.attempts} attempts (the worker died each time)",
        )
        return False
    claimed = Compaction.objects.filter(
        pk=run.pk, status=Status.RUNNING, attempts=run.attempts
    ).update(started_at=now, attempts=F("attempts") + 1)
    run.refresh_from_db()
    return bool(claimed)


def run_compaction(compaction_id: int) -> Compaction:
    """Run one compaction to its end: the body of the ``compact_session`` task.

    Idempotent: a finished row is returned as is; a row another worker is running (live
    lease) is returned still ``running``. A run that finds its session's lease held by
    another run (a what-if, typically) goes back to ``queued`` and is sent again when that
    run lets go. Transient database errors that outlast the in-place retries propagate (the
    task retries them); any other error fails the run.
    """
    run = Compaction.objects.select_related("session").get(pk=compaction_id)
    if run.is_finished or not _claim(run):
        return run
    holder = holder_for(run)
    if not acquire_lock(run.session_id, holder):
        if live_lease_of(run):  # a duplicate delivery of this very run won the lease
            return run
        return _wait_for_lease(run)
    deadline = settings.HERMES_RUN_DEADLINE_SECONDS

    def on_deadline() -> None:
        Compaction.objects.filter(pk=run.pk, status=Status.RUNNING).update(
            status=Status.FAILED,
            error=f"timed out: still running after {deadline}s (HERMES_RUN_DEADLINE_SECONDS)",
            finished_at=timezone.now(),
        )

    try:
        with Heartbeat(run.session_id, holder, deadline_seconds=deadline, on_deadline=on_deadline):
            return _run_locked(run, holder)
    except TRANSIENT_DB_ERRORS:
        log.warning("compaction %s: database unavailable; the task will retry", run.public_id)
        raise
    except Exception as error:
        log.exception("compaction %s failed", run.public_id)
        return run.finish(Status.FAILED, error=f"{type(error).__name__}: {error}"[:2000])
    finally:
        try:
            release_lock(run.session_id, holder)
            _send_waiting(run)
        except TRANSIENT_DB_ERRORS as error:  # the lease lapses by itself in a few seconds
            log.warning("compaction %s: could not release its lease: %s", run.public_id, error)


def _wait_for_lease(run: Compaction) -> Compaction:
    """Another run holds the lease: back to ``queued`` (not skipped), to run after it."""
    Compaction.objects.filter(pk=run.pk, status=Status.RUNNING).update(
        status=Status.QUEUED, started_at=None, attempts=F("attempts") - 1
    )
    run.refresh_from_db()
    # The holder may have let go between our attempt and the requeue, and sent nothing:
    # look once more, so a waiting run is never left behind.
    released = not SessionLock.objects.filter(session_id=run.session_id).exclude(holder="").exists()
    if released and run.status == Status.QUEUED:
        _send(run.pk)
    return run


def _send_waiting(run: Compaction) -> None:
    """Send the runs of this session that waited for the lease this run just released."""
    waiting = Compaction.objects.filter(session_id=run.session_id, status=Status.QUEUED).exclude(
        pk=run.pk
    )
    for pk in waiting.order_by("queued_at", "pk").values_list("pk", flat=True):
        _send(pk)


def _send(compaction_id: int) -> None:
    try:
        jobs.send_compaction(compaction_id)
    except TRANSIENT_DB_ERRORS:
        raise
    except Exception as error:  # broker down: the recovery sweep sends it later
        log.warning("could not send compaction %s: %s", compaction_id, error)


def _run_locked(run: Compaction, holder: str) -> Compaction:
    run.refresh_from_db()
    if run.is_finished:  # an earlier attempt committed while we waited for its lease
        return run
    session = Session.objects.get(pk=run.session_id)
    what_if = run.trigger == Compaction.Trigger.WHAT_IF
    if not what_if and session.is_rotated:
        return run.finish(
            Status.SKIPPED,
            reason="superseded",
            report={"status": "skipped", "reason": "superseded"},
        )
    config = (
        CompactionConfig.from_dict(run.config) if run.config else compaction_config_for(session)
    )
    messages, token_counts, snapshot, provider_prompt = _load_active(session.pk)
    Compaction.objects.filter(pk=run.pk).update(snapshot_position=snapshot)
    run.snapshot_position = snapshot
    recount = (
        any(
            run.config.get(k)
            not in (None, getattr(CompactionConfig(model=token_model(session)), k))
            for k in _RECOUNT_FIELDS
        )
        if run.config
        else False
    )
    result = compact(
        messages,
        config=config,
        summarizer=build_summarizer(run.summarizer or "auto"),
        now=timezone.now().date(),
        previous_summary=session.previous_summary or None,
        focus=run.focus or None,
        force=run.trigger != Compaction.Trigger.AUTO,
        token_counts=None if recount else token_counts,
        provider_prompt_tokens=provider_prompt,
    )
    # The input is the biggest thing this process holds (a million messages: most of the
    # worker's memory); the result keeps only head, summary and tail. Drop it before the
    # report is serialized and the commit builds its rows.
    del messages, token_counts
    report = result.report.to_dict()
    tokens = report.get("tokens") or {}
    outcome = {
        "report": report,
        "reason": (report.get("reason") or "")[:64],
        "tokens_before": tokens.get("before"),
        "tokens_after": tokens.get("after"),
        "provider_prompt_tokens": provider_prompt,
        "summarizer": report.get("summarizer") or "",
        "summarizer_model": report.get("summarizer_model") or "",
    }
    if what_if:
        return run.finish(Status.DRY_RUN, **outcome)
    if result.status == "skipped":
        return run.finish(Status.SKIPPED, **outcome)
    if result.status == "aborted":
        return run.finish(Status.ABORTED, **outcome)
    if run.mode == Compaction.Mode.IN_PLACE:
        return _commit_in_place(run, session, result, report, outcome, holder)
    return _commit_rotation(run, session, result, report, outcome, holder)


@db_retry
def _load_active(session_id: int) -> tuple[list[dict], list[int], int, int | None]:
    """Active messages in engine format, their stored token counts, the last position, and
    the newest provider prompt count. Read as plain tuples: model instances for 10k rows
    cost more than the engine run itself."""
    rows = (
        Message.objects.filter(session_id=session_id, active=True)
        .order_by("position")
        .values_list("position", *Message.ENGINE_COLUMNS, "token_count", "provider_prompt_tokens")
    )
    messages, counts, snapshot, provider_prompt = [], [], 0, None
    for (
        position,
        role,
        content,
        tool_calls,
        tool_call_id,
        tool_name,
        reasoning,
        tokens,
        prompt,
    ) in rows.iterator(chunk_size=2000):
        messages.append(
            Message.engine_dict(
                # Every row's strings are new objects; a million rows repeat a handful of
                # roles and tool names, so share one object each (about 60 MB per million).
                role=intern(role),
                content=content,
                tool_calls=_shared_call_strings(tool_calls) if tool_calls else tool_calls,
                tool_call_id=tool_call_id,
                tool_name=intern(tool_name) if tool_name else tool_name,
                reasoning=reasoning,
            )
        )
        counts.append(tokens)
        snapshot = position
        if prompt is not None:
            provider_prompt = prompt
            # Rides along (the engine keeps a verbatim row's extra keys) so a row carried
            # into the result keeps its per-call "prompt N tokens" label.
            messages[-1]["provider_prompt_tokens"] = prompt
    return messages, counts, snapshot, provider_prompt


def _shared_call_strings(tool_calls):
    """Share the repeated strings of decoded tool calls (type, function name) in place."""
    if isinstance(tool_calls, list):
        for call in tool_calls:
            if isinstance(call, dict):
                if isinstance(call.get("type"), str):
                    call["type"] = intern(call["type"])
                function = call.get("function")
                if isinstance(function, dict) and isinstance(function.get("name"), str):
                    function["name"] = intern(function["name"])
    return tool_calls


def _rows_for(
    session_id: int, messages: list[dict], token_counts, summary_index, first_position: int, now
) -> list[Message]:
    rows = []
    for offset, message in enumerate(messages):
        known = {"role", "content", "tool_calls", "tool_call_id", "name", "tool_name", "reasoning"}
        known.add("provider_prompt_tokens")
        rows.append(
            Message(
                session_id=session_id,
                position=first_position + offset,
                role=message.get("role"),
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
def _commit_rotation(run, session, result, report, outcome, holder) -> Compaction:
    now = timezone.now()
    try:
        with transaction.atomic():
            if not still_holding(session.pk, holder):
                return _lost_lease(run)
            parent = Session.objects.select_for_update().get(pk=session.pk)
            child = Session.objects.create(
                owner_id=parent.owner_id,
                title=parent.title,
                source=parent.source,
                model=parent.model,
                context_length=parent.context_length,
                compaction_mode=parent.compaction_mode,
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
        return _lost_lease(run)
    run.refresh_from_db()
    return run


@db_retry
def _commit_in_place(run, session, result, report, outcome, holder) -> Compaction:
    now = timezone.now()
    try:
        with transaction.atomic():
            if not still_holding(session.pk, holder):
                return _lost_lease(run)
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
        return _lost_lease(run)
    run.refresh_from_db()
    return run


class _Superseded(Exception):
    """Raised inside a commit's transaction to roll it back: the run is no longer running."""


def _lost_lease(run: Compaction) -> Compaction:
    log.warning("compaction %s lost its lease before commit; nothing written", run.public_id)
    run.refresh_from_db()
    return run


def stranded_runs(*, queued_for: timedelta = timedelta(minutes=2)) -> list[int]:
    """Runs whose task was lost: queued for a while, or running without a live lease.

    The embedded SQLite broker does not redeliver the task of a worker killed mid-run, and a
    task can be lost between commit and publish when the broker is down. Re-sending such a
    run is safe: ``run_compaction`` is idempotent and re-claims only a run nobody holds.
    """
    now = timezone.now()
    queued = list(
        Compaction.objects.filter(status=Status.QUEUED, queued_at__lt=now - queued_for).values_list(
            "pk", flat=True
        )
    )
    running = [
        run.pk
        for run in Compaction.objects.filter(
            status=Status.RUNNING, started_at__lt=now - timedelta(seconds=5)
        )
        if not live_lease_of(run)
    ]
    return queued + running
