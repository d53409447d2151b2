"""Session leases: one compaction per session at a time, healed within seconds of a crash.

A run takes its session's lease with one conditional UPDATE (free or expired), then a
:class:`Heartbeat` thread renews it every ``HERMES_LEASE_HEARTBEAT_SECONDS`` while the run
works. The lease itself is short (``HERMES_LOCK_LEASE_SECONDS``): a worker that dies stops
renewing, its lease lapses within that time, and the recovery sweep hands the run to a live
worker (see ``services.compactions.stranded_runs``). The heartbeat also enforces the run's
deadline, which the threads pool of the embedded setup does not (Celery's time limits need
signals and a process per task): past it, the run is failed and the lease given up, so a hung
summarizer call cannot hold a session forever; its late commit finds the lease gone and
writes nothing.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from hermes_web.models import Compaction, SessionLock

log = logging.getLogger(__name__)


def lease_duration() -> timedelta:
    """How long a lease lives without a renewal."""
    return timedelta(seconds=settings.HERMES_LOCK_LEASE_SECONDS)


def acquire_lock(session_id: int, holder: str) -> bool:
    """Take the session's lease if it is free or expired (one conditional UPDATE)."""
    # get_or_create survives a concurrent insert of the same row (it re-reads on IntegrityError).
    SessionLock.objects.get_or_create(session_id=session_id)
    now = timezone.now()
    taken = SessionLock.objects.filter(
        Q(holder="") | Q(expires_at__isnull=True) | Q(expires_at__lt=now), session_id=session_id
    ).update(holder=holder, expires_at=now + lease_duration())
    return taken == 1


def renew_lock(session_id: int, holder: str) -> bool:
    """Push the lease's expiry forward; False when ``holder`` no longer holds it."""
    return bool(
        SessionLock.objects.filter(session_id=session_id, holder=holder).update(
            expires_at=timezone.now() + lease_duration()
        )
    )


def release_lock(session_id: int, holder: str) -> None:
    """Give the lease up (only if ``holder`` still has it)."""
    SessionLock.objects.filter(session_id=session_id, holder=holder).update(
        holder="", expires_at=None
    )


def holder_for(run: Compaction) -> str:
    """A fresh holder name for one attempt at ``run``."""
    # The run's id leads, so a redelivered task can tell its own live lease from another run's.
    return f"{run.public_id}:{uuid.uuid4().hex[:12]}"


def live_lease_of(run: Compaction) -> bool:
    """Whether some attempt at ``run`` holds an unexpired lease (its worker is heart-beating)."""
    return SessionLock.objects.filter(
        session_id=run.session_id,
        holder__startswith=f"{run.public_id}:",
        expires_at__gt=timezone.now(),
    ).exists()


def lease_remaining(run: Compaction) -> int:
    """Seconds until the session's current lease expires (0 when free)."""
    expires = (
        SessionLock.objects.filter(session_id=run.session_id)
        .values_list("expires_at", flat=True)
        .first()
    )
    if not expires:
        return 0
    return max(0, int((expires - timezone.now()).total_seconds()))


def still_holding(session_id: int, holder: str) -> bool:
    """Commit-time check, inside the commit's transaction: is the lease still ours?

    The row stays locked until the commit ends (PostgreSQL), or the whole database does
    (SQLite's IMMEDIATE transactions), so nobody can take the lease over half-way.
    """
    lock = SessionLock.objects.select_for_update().filter(session_id=session_id).first()
    return lock is not None and lock.holder == holder


class Heartbeat:
    """Renew a lease in a daemon thread while a run works; enforce the run's deadline.

    Use as a context manager around the work. ``lost`` turns True when the lease was taken
    over (the worker was presumed dead, e.g. paused longer than a lease); ``timed_out`` when
    the deadline passed, after which ``on_deadline`` is called once and the lease released.
    """

    def __init__(
        self,
        session_id: int,
        holder: str,
        *,
        deadline_seconds: float | None = None,
        on_deadline: Callable[[], None] | None = None,
        interval: float | None = None,
    ):
        self.session_id = session_id
        self.holder = holder
        self.interval = float(
            interval if interval is not None else settings.HERMES_LEASE_HEARTBEAT_SECONDS
        )
        self.deadline_seconds = (
            deadline_seconds
            if deadline_seconds is not None
            else settings.HERMES_RUN_DEADLINE_SECONDS
        )
        self.on_deadline = on_deadline
        self.lost = False
        self.timed_out = False
        self.renewals = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Heartbeat:
        self._thread = threading.Thread(
            target=self._loop, name=f"lease-heartbeat-{self.session_id}", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 5)

    def _loop(self) -> None:
        started = timezone.now()
        try:
            while not self._stop.wait(self._next_wait(started)):
                if self._past_deadline(started):
                    self._expire()
                    return
                try:
                    if renew_lock(self.session_id, self.holder):
                        self.renewals += 1
                    else:
                        self.lost = True
                        log.warning(
                            "lease %s on session %s was taken over", self.holder, self.session_id
                        )
                        return
                except Exception as error:  # a database hiccup: try again at the next beat
                    log.warning("could not renew lease %s: %s", self.holder, error)
                    connection.close()
        finally:
            connection.close()  # this thread's own connection

    def _next_wait(self, started) -> float:
        if not self.deadline_seconds:
            return self.interval
        left = self.deadline_seconds - (timezone.now() - started).total_seconds()
        return max(0.05, min(self.interval, left))

    def _past_deadline(self, started) -> bool:
        return bool(self.deadline_seconds) and (
            (timezone.now() - started).total_seconds() >= self.deadline_seconds
        )

    def _expire(self) -> None:
        self.timed_out = True
        log.error(
            "lease %s: the run passed its %ss deadline; failing it",
            self.holder,
            self.deadline_seconds,
        )
        try:
            # One transaction: whoever sees the run failed also sees the session free, so a
            # new run never has to wait for the hung one's lease.
            with transaction.atomic():
                if self.on_deadline is not None:
                    self.on_deadline()
                release_lock(self.session_id, self.holder)
        except Exception:
            log.exception("lease %s: could not record the deadline", self.holder)
