"""Celery tasks. Each takes ids only, loads its row, and calls one service; re-runs are no-ops."""

import logging
import socket
from datetime import timedelta

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_ready
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, transaction
from django.utils import timezone

from hermes_web.models import AgentTurn, Compaction, WorkerPing

log = logging.getLogger(__name__)


def enqueue_on_commit(task, row_id: int) -> None:
    """Send ``task(row_id)`` once the current transaction commits, never failing the request.

    If the broker cannot be reached the row stays queued in the database and
    ``recover_stranded_runs`` sends it again later: the user's request still succeeds.
    """

    def send() -> None:
        if task.app.conf.task_always_eager:
            task.delay(row_id)  # runs inline: its own errors must surface, not be logged away
            return
        try:
            task.delay(row_id)
        except Exception as error:  # each transport raises its own connection errors
            log.warning("could not queue %s(%s): %s; it will be re-sent", task.name, row_id, error)

    transaction.on_commit(send)


@shared_task(name="hermes_web.tasks.ping_worker")
def ping_worker(ping_id: int) -> None:
    """Stamp a WorkerPing so the web side can see a worker took a task off the broker."""
    WorkerPing.objects.filter(pk=ping_id, processed_at__isnull=True).update(
        processed_at=timezone.now(), worker=socket.gethostname()
    )


# Database hiccups (SQLite busy past its timeout, a dropped PostgreSQL connection) are
# worth retrying; anything else is recorded on the row by run_compaction itself.
_DB_ERRORS = (OperationalError, InterfaceError)


@shared_task(
    bind=True,
    name="hermes_web.tasks.compact_session",
    acks_late=True,
    max_retries=5,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def compact_session(self, compaction_id: int) -> str | None:
    """Run one queued compaction (see services.compactions.run_compaction)."""
    from hermes_web.services.compactions import lease_remaining, mark_failed, run_compaction

    try:
        run = run_compaction(compaction_id)
    except Compaction.DoesNotExist:
        return None  # the session was deleted meanwhile
    except _DB_ERRORS as error:
        close_old_connections()
        if self.request.retries >= self.max_retries:
            mark_failed(
                compaction_id,
                f"database error, gave up after {self.request.retries} retries: {error}",
            )
            raise
        raise self.retry(exc=error, countdown=min(60, 2 ** (self.request.retries + 1))) from error
    except SoftTimeLimitExceeded:
        mark_failed(compaction_id, "timed out (soft time limit)")
        return "failed"
    # Another delivery holds a live lease on this run (or a killed worker's lease has not
    # expired yet): look again once it could have expired.
    if run.status == Compaction.Status.RUNNING and self.request.retries < self.max_retries:
        raise self.retry(countdown=lease_remaining(run) + 1)
    return run.status


@shared_task(bind=True, name="hermes_web.tasks.run_agent_turn", acks_late=True, max_retries=None)
def run_agent_turn(self, turn_id: int) -> None:
    """Run one chat turn (see agent.runner.run_turn); it comes back later while a compaction runs."""
    from hermes_web.agent.runner import run_turn

    wait = run_turn(turn_id)
    if wait is not None:
        raise self.retry(countdown=wait, max_retries=None)


@shared_task(name="hermes_web.tasks.recover_stranded_runs")
def recover_stranded_runs() -> int:
    """Re-send compactions and chat turns whose task was lost (killed worker, broker outage)."""
    from hermes_web.services.compactions import stranded_runs

    ids = stranded_runs()
    for compaction_id in ids:
        compact_session.delay(compaction_id)
    # A queued turn is only waiting in the broker for a moment; one queued for minutes was
    # never sent (broker down at the time) or its message was lost. run_turn is idempotent.
    since = timezone.now() - STRANDED_TURN_AGE
    turns = list(
        AgentTurn.objects.filter(status=AgentTurn.Status.QUEUED, created_at__lt=since).values_list(
            "pk", flat=True
        )
    )
    for turn_id in turns:
        run_agent_turn.delay(turn_id)
    return len(ids) + len(turns)


STRANDED_TURN_AGE = timedelta(minutes=2)


@worker_ready.connect
def _recover_on_start(sender=None, **kwargs) -> None:
    # A worker starting up is often a worker coming back after a crash: look for its
    # stranded runs at once instead of waiting for the next beat.
    recover_stranded_runs.apply_async(countdown=2)
