"""Celery tasks. Each takes ids only, loads its row, and calls one service; re-runs are no-ops.

Each worker process also runs a :class:`WorkerMonitor` thread (heartbeat row + recovery sweep).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from datetime import timedelta

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import (
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
)
from django.utils import timezone

from hermes_web.jobs import enqueue_on_commit  # noqa: F401  (moved to jobs; kept for callers)
from hermes_web.models import AgentTurn, Compaction, WorkerHeartbeat, WorkerPing

log = logging.getLogger(__name__)


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
    from hermes_web.services.compactions import mark_failed, run_compaction

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
    # Still "running": another delivery of this run holds a live lease (nothing to do; if its
    # worker dies the recovery sweep sends the run again). "queued": it waits behind another
    # run's lease and is sent again when that run lets go.
    return run.status


@shared_task(
    name="hermes_web.tasks.run_recall_test",
    acks_late=True,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def run_recall_test(test_id: int) -> str | None:
    """Run one queued recall test (services.recall_test); a re-delivery is a no-op."""
    from hermes_web.models import RecallTest
    from hermes_web.services.recall_test import run_recall_test as run

    try:
        return run(test_id).status
    except RecallTest.DoesNotExist:
        return None  # the compaction was deleted meanwhile
    except SoftTimeLimitExceeded:
        RecallTest.objects.filter(pk=test_id, status=RecallTest.Status.RUNNING).update(
            status=RecallTest.Status.FAILED, error="timed out (soft time limit)"
        )
        return "failed"


@shared_task(name="hermes_web.tasks.index_search")
def index_search(session_id: int | None = None) -> int:
    """Index every row written since the last indexing (search; ``session_id`` only names
    the session whose writing queued it). Returns the entries indexed."""
    from hermes_web.services.search_index import sync

    return sync()


@shared_task(bind=True, name="hermes_web.tasks.run_agent_turn", acks_late=True, max_retries=None)
def run_agent_turn(self, turn_id: int) -> None:
    """Run one chat turn (see agent.loop.run_turn); it comes back later while a compaction runs."""
    from hermes_web.agent.loop import run_turn

    wait = run_turn(turn_id)
    if wait is not None:
        raise self.retry(countdown=wait, max_retries=None)


@shared_task(name="hermes_web.tasks.recover_stranded_runs")
def recover_stranded_runs() -> int:
    """Re-send compactions and chat turns whose task was lost (killed worker, broker outage)."""
    from hermes_web.services.compactions import stranded_runs

    ids = [pk for pk in stranded_runs() if _not_sent_lately(pk)]
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


@shared_task(name="hermes_web.tasks.sweep_temp_dirs")
def sweep_temp_dirs() -> int:
    """Remove the temporary upload and import folders killed processes left (tempdirs.sweep)."""
    from hermes_web.tempdirs import sweep

    return sweep()


@shared_task(name="hermes_web.tasks.discard_abandoned_imports")
def discard_abandoned_imports() -> int:
    """Delete sessions a killed import left half-written (importers.discard.discard_abandoned)."""
    from hermes_web.importers.discard import discard_abandoned

    return discard_abandoned()


# One scan at a time in a worker process: a scan longer than the beat's period is not doubled.
_follow_lock = threading.Lock()


@shared_task(name="hermes_web.tasks.follow_folders")
def follow_folders() -> int:
    """Import what changed in the followed folders (importers.follow; cheap when nothing did:
    one stat per file). Returns the files imported."""
    from hermes_web.importers.follow import scan_followed_folders

    if not _follow_lock.acquire(blocking=False):
        return 0
    try:
        return scan_followed_folders()
    finally:
        _follow_lock.release()


@shared_task(name="hermes_web.tasks.checkpoint_wal")
def checkpoint_wal() -> None:
    """Write SQLite's WAL back and cut it (``wal_checkpoint(TRUNCATE)``), so chat turns and
    ``/v1`` writes between imports do not grow it for as long as the server runs; nothing on
    PostgreSQL."""
    from hermes_web.importers import checkpoint

    checkpoint()


# Run id -> when this process last re-sent it: the sweep runs every few seconds in every
# worker, and a re-sent run needs a moment to be picked up and to show a live lease again.
_recently_sent: dict[int, float] = {}
_sent_lock = threading.Lock()


def _not_sent_lately(compaction_id: int) -> bool:
    now = time.monotonic()
    quiet = settings.HERMES_LOCK_LEASE_SECONDS + settings.HERMES_RECOVERY_SWEEP_SECONDS
    with _sent_lock:
        for pk, at in list(_recently_sent.items()):
            if now - at > quiet:
                del _recently_sent[pk]
        if compaction_id in _recently_sent:
            return False
        _recently_sent[compaction_id] = now
        return True


class WorkerMonitor:
    """A daemon thread in each worker process: its heartbeat row and the recovery sweep.

    Every ``HERMES_RECOVERY_SWEEP_SECONDS``: stamp ``WorkerHeartbeat`` (what /healthz and the
    "no worker is running" banner read), then re-send runs whose lease lapsed. Running the
    sweep in every worker, not only in beat, is what takes a dead worker's run over within
    seconds in both setups (the scaled one may run no beat at all, or lose it).
    """

    def __init__(self, name: str, queues: str, interval: float | None = None):
        self.name = name[:200]
        self.queues = queues[:200]
        self.interval = interval or settings.HERMES_RECOVERY_SWEEP_SECONDS
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hermes-monitor", daemon=True)

    def start(self) -> WorkerMonitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 5)
        try:
            WorkerHeartbeat.objects.filter(name=self.name).delete()
        except Exception as error:  # shutting down with the database gone: it ages out
            log.warning("worker monitor: could not remove heartbeat: %s", error)
        finally:
            connection.close()

    def forget_predecessors(self) -> None:
        """Drop the rows of earlier processes of this worker (same node name, another pid):
        a worker killed and started again is not reported down (health.check_workers)."""
        node = self.name.rsplit(":", 1)[0]
        WorkerHeartbeat.objects.filter(name__startswith=f"{node}:").exclude(name=self.name).delete()

    def beat(self) -> None:
        """One round: heartbeat row, then the sweep."""
        now = timezone.now()
        WorkerHeartbeat.objects.update_or_create(
            name=self.name, defaults={"last_seen": now, "queues": self.queues}
        )
        # Killed workers never remove their row: forget them after a day.
        WorkerHeartbeat.objects.filter(last_seen__lt=now - timedelta(days=1)).delete()
        recover_stranded_runs()

    def _loop(self) -> None:
        try:
            self.forget_predecessors()
        except Exception as error:  # database down: the rows age out in a day
            log.warning("worker monitor: %s: %s", type(error).__name__, error)
        while True:
            try:
                self.beat()
            except Exception as error:  # database or broker down: next round
                log.warning("worker monitor: %s: %s", type(error).__name__, error)
                connection.close()
            if self._stop.wait(self.interval):
                return


_monitor: WorkerMonitor | None = None


@worker_ready.connect
def _start_monitor(sender=None, **kwargs) -> None:
    # A worker starting up is often a worker coming back after a crash: its first sweep
    # runs at once, then every few seconds.
    global _monitor
    hostname = getattr(sender, "hostname", None) or socket.gethostname()
    queues = ""
    with contextlib.suppress(Exception):
        queues = ",".join(sorted(q.name for q in sender.app.amqp.queues.consume_from.values()))
    _monitor = WorkerMonitor(f"{hostname}:{os.getpid()}", queues).start()


@worker_shutdown.connect
def _stop_monitor(**kwargs) -> None:
    if _monitor is not None:
        _monitor.stop()
