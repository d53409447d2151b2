"""SQLite's WAL is checkpointed by a beat task (issue #39), not only after an import: chat
turns and ``/v1`` writes between imports do not keep it growing while the server runs."""

import os

import pytest
from django.conf import settings
from django.db import connection

from hermes_web.models import Message, Session
from hermes_web.tasks import checkpoint_wal


@pytest.mark.django_db(transaction=True)
def test_the_beat_task_truncates_the_wal(alice):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's WAL; a no-op on PostgreSQL")
    session = Session.objects.create(owner=alice, title="writes between imports")
    Message.objects.bulk_create(
        Message(session=session, position=i, role="user", content="w" * 4000) for i in range(300)
    )
    wal = connection.settings_dict["NAME"] + "-wal"
    assert os.path.getsize(wal) > 2**20  # the rows sit in the WAL until a checkpoint

    checkpoint_wal.apply().get()

    assert os.path.getsize(wal) == 0
    entries = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "hermes_web.tasks.checkpoint_wal" in entries
