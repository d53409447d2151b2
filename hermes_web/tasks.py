"""Celery tasks. Each takes ids only, loads its row, and calls one service; re-runs are no-ops."""

import socket

from celery import shared_task
from django.utils import timezone

from hermes_web.models import WorkerPing


@shared_task(name="hermes_web.tasks.ping_worker")
def ping_worker(ping_id: int) -> None:
    """Stamp a WorkerPing so the web side can see a worker took a task off the broker."""
    WorkerPing.objects.filter(pk=ping_id, processed_at__isnull=True).update(
        processed_at=timezone.now(), worker=socket.gethostname()
    )
