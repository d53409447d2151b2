"""Deleting what an import stored: a refused or interrupted import leaves nothing.

Kept apart from ``store`` (which imports the budget, the jobs seam and the workers' queue) so
that the budget's undo and a worker's start can delete without importing any of those.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from hermes_web.models import IMPORT_PENDING, Compaction, Message, Session

_BATCH = 500
PENDING = IMPORT_PENDING


def discard(pks: list[int]) -> None:
    """Delete sessions an import stored (their messages and native compactions first), a
    few thousand rows per transaction so that other writers are never held for long."""
    qn = connection.ops.quote_name
    for start in range(0, len(pks), _BATCH):
        chunk = pks[start : start + _BATCH]
        while True:
            with transaction.atomic():
                ids = list(
                    Message.objects.filter(session_id__in=chunk).values_list("pk", flat=True)[
                        :_DISCARD_ROWS
                    ]
                )
                if not ids:
                    break
                # Rows of our own import: no other row points at them, so a plain DELETE
                # (the ORM's collector would load every row first).
                with connection.cursor() as cursor:
                    cursor.execute(
                        f"DELETE FROM {qn(Message._meta.db_table)} WHERE "  # noqa: S608 - our table
                        f"{qn('id')} IN ({', '.join(['%s'] * len(ids))})",
                        ids,
                    )
        with transaction.atomic():
            Compaction.objects.filter(session_id__in=chunk).delete()
            Session.objects.filter(pk__in=chunk).delete()


_DISCARD_ROWS = 2000


ABANDON_MARGIN = timedelta(minutes=10)


def discard_abandoned(now: datetime | None = None) -> int:
    """Delete sessions a killed import left marked pending (``PENDING``) for longer than any
    import may run; how many. Run at a worker's start and periodically (tasks)."""
    limit = timedelta(seconds=settings.HERMES_IMPORT_CLI_SECONDS) + ABANDON_MARGIN
    before = (now or timezone.now()) - limit
    pks = list(
        Session.objects.filter(extra__has_key=PENDING, updated_at__lt=before).values_list(
            "pk", flat=True
        )
    )
    discard(pks)
    return len(pks)
