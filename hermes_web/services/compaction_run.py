"""Running a queued compaction: claim the row, take the session's lease, run the engine
outside any transaction, then commit (``compaction_commit``) or record why not.

``run_compaction`` is the body of the ``compact_session`` task and is idempotent; a run whose
worker died is taken over (``_claim``), and ``stranded_runs`` finds runs whose task was lost.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from sys import intern

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from compaction import (
    CompactionConfig,
    CompactionResult,
    DeterministicSummarizer,
    compact,
    count_message_tokens,
)
from hermes_web import jobs
from hermes_web.llm_models import build_summarizer
from hermes_web.models import Compaction, Message, Session, SessionLock
from hermes_web.services.bounded_compaction import active_span, compact_bounded, is_bounded
from hermes_web.services.compaction_commit import commit_in_place, commit_rotation
from hermes_web.services.dbretry import TRANSIENT_DB_ERRORS, db_retry
from hermes_web.services.leases import (
    Heartbeat,
    acquire_lock,
    holder_for,
    live_lease_of,
    release_lock,
)
from hermes_web.services.sessions import compaction_config_for, token_model

log = logging.getLogger("hermes_web.services.compactions")

Status = Compaction.Status
# After this many claims of one row (workers killed mid-run) it is marked failed.
MAX_ATTEMPTS = 3
# A running row without a lease is only taken over once it was claimed longer ago than this
# (between its claim and its lease, a live worker holds no lease yet).
CLAIM_GRACE = timedelta(seconds=5)
# Fields whose change makes stored per-message token counts wrong for this run.
_RECOUNT_FIELDS = ("model", "per_message_overhead", "image_tokens")

__all__ = ["mark_failed", "run_compaction", "stranded_runs"]


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
    recount = (
        any(
            run.config.get(k)
            not in (None, getattr(CompactionConfig(model=token_model(session)), k))
            for k in _RECOUNT_FIELDS
        )
        if run.config
        else False
    )
    summarizer = build_summarizer(run.summarizer or "auto")
    replay = run.replay_of_id is not None

    def engine(
        messages: list[dict], counts: list[int], provider_prompt: int | None, probe: bool = False
    ) -> CompactionResult:
        return compact(
            messages,
            config=config,
            summarizer=DeterministicSummarizer() if probe else summarizer,
            now=timezone.now().date(),
            # A replay gives the engine the rows as they were before the agent compacted:
            # the session's newest summary came after them.
            previous_summary=None if replay else session.previous_summary or None,
            focus=run.focus or None,
            force=run.trigger != Compaction.Trigger.AUTO,
            token_counts=None if recount else counts,
            provider_prompt_tokens=provider_prompt,
        )

    active, top = (0, 0) if replay else active_span(session.pk)
    if replay:
        # What-if on exactly the rows an agent's own compaction replaced (replay_of).
        messages, token_counts, snapshot, provider_prompt = _load_rows(run.input_rows(), config)
        Compaction.objects.filter(pk=run.pk).update(snapshot_position=snapshot)
        run.snapshot_position = snapshot
        result = engine(messages, token_counts, provider_prompt)
        del messages, token_counts
        report = result.report.to_dict()
    elif is_bounded(active):
        # A session this long does not fit the worker's memory: the engine gets its head,
        # the middle's two ends and the rows the tail can reach (bounded_compaction).
        Compaction.objects.filter(pk=run.pk).update(snapshot_position=top)
        run.snapshot_position = top
        bounded = compact_bounded(
            session.pk,
            config,
            top,
            active,
            engine,
            probe_first=not isinstance(summarizer, DeterministicSummarizer),
        )
        result, report = bounded.result, bounded.report
        log.info(
            "compaction %s: bounded, %d of %d messages loaded (%d engine run(s))",
            run.public_id,
            bounded.loaded,
            active,
            bounded.rounds,
        )
        provider_prompt = report.get("tokens", {}).get("provider_prompt_tokens")
        del bounded
    else:
        messages, token_counts, snapshot, provider_prompt = _load_active(session.pk, config)
        Compaction.objects.filter(pk=run.pk).update(snapshot_position=snapshot)
        run.snapshot_position = snapshot
        result = engine(messages, token_counts, provider_prompt)
        # The input is the biggest thing this process holds (a million messages: most of
        # the worker's memory); the result keeps only head, summary and tail. Drop it
        # before the report is serialized and the commit builds its rows.
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
        return commit_in_place(run, session, result, report, outcome, holder)
    return commit_rotation(run, session, result, report, outcome, holder)


@db_retry
def _load_active(
    session_id: int, config: CompactionConfig | None = None
) -> tuple[list[dict], list[int], int, int | None]:
    """Active messages in engine format, their stored token counts, the last position, and
    the newest provider prompt count. Read as plain tuples: model instances for 10k rows
    cost more than the engine run itself. With ``config``, an agent's summary row (wrapped
    for the engine) is counted as wrapped."""
    return _load_rows(
        Message.objects.filter(session_id=session_id, active=True).order_by("position"), config
    )


@db_retry
def _load_rows(
    rows, config: CompactionConfig | None = None
) -> tuple[list[dict], list[int], int, int | None]:
    """``_load_active`` of any ordered queryset of messages (a replay's replaced rows)."""
    rows = rows.values_list(
        "position",
        *Message.PROMPT_COLUMNS,
        "token_count",
        "provider_prompt_tokens",
        "created_at",
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
        is_summary,
        tokens,
        prompt,
        created_at,
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
                is_summary=is_summary,
            )
        )
        if is_summary and config is not None and messages[-1]["content"] is not content:
            # An agent's summary, stored as written, wrapped for the engine: the stored
            # count is of the agent's words, the engine reads the wrapped row.
            tokens = count_message_tokens(messages[-1], config)
        # The row's own time, so the summary dates an imported session's actions by when
        # they happened, not by the day of the compaction (the engine reads ``timestamp``;
        # a commit drops it, and it never reaches a provider).
        messages[-1]["timestamp"] = created_at.isoformat()
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
