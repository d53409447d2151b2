"""Compaction runs: requested and queued here, run in ``compaction_run``, committed by
rotation or in place in ``compaction_commit`` (leases: ``leases``).

A run's life: ``request_compaction`` stores a queued row and enqueues ``compact_session``
after the transaction commits; ``run_compaction`` (the task body) claims the row, takes the
session's lease, runs the engine outside any transaction, then commits everything in one
transaction, or nothing. The requested summarizer (``auto`` / ``deterministic``) is kept in
``Compaction.summarizer`` until the run replaces it with the one actually used.

This module is the public face of all three: what other modules import comes from here.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from compaction import CompactionOutcome, should_compact
from hermes_web import jobs
from hermes_web.models import Compaction, Message, Session
from hermes_web.services.compaction_run import (  # noqa: F401  (_load_active: tests read it here)
    MAX_ATTEMPTS,
    _load_active,
    mark_failed,
    run_compaction,
    stranded_runs,
)
from hermes_web.services.leases import acquire_lock, release_lock
from hermes_web.services.sessions import compaction_config_for, normalize_mode

__all__ = [
    "MAX_ATTEMPTS",
    "SUMMARIZER_CHOICES",
    "CompactionBusy",
    "CompactionRefused",
    "acquire_lock",
    "commit_what_if",
    "compaction_config_for",
    "in_progress",
    "lineage_history",
    "mark_failed",
    "maybe_auto_compact",
    "release_lock",
    "request_compaction",
    "run_compaction",
    "stranded_runs",
]

Status = Compaction.Status
IN_PROGRESS = Compaction.IN_PROGRESS
SUMMARIZER_CHOICES = ("auto", "deterministic")
# How long the anti-thrash block holds before one automatic attempt is allowed again.
ANTI_THRASH_COOLDOWN = timedelta(seconds=300)


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
    replay_of: Compaction | None = None,
    asked_by: dict | None = None,
) -> Compaction:
    """Store a queued run and enqueue it after commit (or run it inline with ``run_now``).
    ``asked_by``: the API request that asked for it (``Compaction.asked_by``), if one did.

    ``trigger="what_if"`` is a dry run: the report is stored, nothing is committed. With
    ``replay_of`` (an agent's own compaction) the dry run reads the rows that one replaced.

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
    if replay_of is not None and trigger != Compaction.Trigger.WHAT_IF:
        raise ValueError("a replay of an agent's compaction is a what-if (dry) run")
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
                replay_of=replay_of,
                asked_by=asked_by or {},
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
        .ours()  # an agent's own compactions say nothing about how our engine fares
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
