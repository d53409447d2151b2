"""Liveness of the database, the broker and the workers, for /healthz and the UI banner."""

import time
from datetime import timedelta

from django.db import connection

from hermes_web.celery import app as celery_app


def check_database() -> dict:
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "down"; the message says which
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {
        "ok": True,
        "vendor": connection.vendor,
        "ms": round((time.perf_counter() - started) * 1000, 1),
    }


def check_broker() -> dict:
    started = time.perf_counter()
    url = celery_app.conf.broker_url or ""
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=3)
    except Exception as exc:  # kombu raises transport-specific errors
        return {
            "ok": False,
            "transport": url.split(":", 1)[0],
            "error": f"{type(exc).__name__}: {exc}",
        }
    return {
        "ok": True,
        "transport": url.split(":", 1)[0],
        "ms": round((time.perf_counter() - started) * 1000, 1),
    }


WORKER_SEEN_SECONDS = 60
# A job queued for longer than this with no worker seen is "waiting without a worker".
WAITING_GRACE_SECONDS = 10


def check_workers() -> dict:
    """Workers seen in the last minute (their heartbeat rows), workers gone silent, and the
    oldest queued job's age.

    A worker stamps its row every few seconds and deletes it when it stops cleanly, so a row
    older than a minute is a worker that died (killed, out of memory) and was not replaced:
    it is listed in ``down`` and ``ok`` is False, as it is when jobs wait and no worker was
    seen (the state in which nothing will ever run them). A worker-less web process with
    nothing queued is fine.
    """
    from django.utils import timezone

    from hermes_web.models import AgentTurn, Compaction, WorkerHeartbeat

    now = timezone.now()
    cutoff = now - timedelta(seconds=WORKER_SEEN_SECONDS)
    try:
        rows = list(WorkerHeartbeat.objects.order_by("name").values_list("name", "last_seen")[:100])
        oldest = [
            Compaction.objects.filter(status=Compaction.Status.QUEUED)
            .order_by("queued_at")
            .values_list("queued_at", flat=True)
            .first(),
            AgentTurn.objects.filter(status=AgentTurn.Status.QUEUED)
            .order_by("created_at")
            .values_list("created_at", flat=True)
            .first(),
        ]
    except Exception as exc:  # the database check reports the cause
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    names = [name for name, seen in rows if seen >= cutoff]
    down = {name: round((now - seen).total_seconds()) for name, seen in rows if seen < cutoff}
    ages = [(now - at).total_seconds() for at in oldest if at is not None]
    oldest_age = round(max(ages), 1) if ages else None
    waiting = oldest_age is not None and oldest_age >= WAITING_GRACE_SECONDS
    waiting_without_worker = waiting and not names
    return {
        "ok": not waiting_without_worker and not down,
        "seen_last_minute": len(names),
        "names": names,
        # Silent for longer than a minute: name -> seconds since its last heartbeat.
        "down": down,
        "waiting_without_worker": waiting_without_worker,
        "oldest_queued_seconds": oldest_age,
    }


def no_worker_running() -> bool:
    """Jobs wait and no worker was seen in the last minute (what the UI banner says)."""
    from django.core.cache import cache

    from hermes_web.caching import WORKER_STATUS_KEY, WORKER_STATUS_SECONDS

    key = WORKER_STATUS_KEY
    value = cache.get(key)
    if value is None:
        value = bool(check_workers().get("waiting_without_worker", True))
        cache.set(key, value, WORKER_STATUS_SECONDS)
    return value
