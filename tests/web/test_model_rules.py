"""Domain rules that live on the models: end reasons, touch(), the compaction querysets."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from hermes_web.models import Compaction, Session
from hermes_web.services.compactions import request_compaction
from hermes_web.services.undo import undo_compaction
from tests.web.compaction_helpers import SMALL_TAIL, conversation

pytestmark = pytest.mark.django_db


def backdate(session: Session, minutes: int = 10) -> Session:
    """Move ``updated_at`` into the past, so a later bump is visible whatever the clock's grain."""
    Session.objects.filter(pk=session.pk).update(
        updated_at=timezone.now() - timedelta(minutes=minutes)
    )
    session.refresh_from_db()
    return session


def test_touch_bumps_updated_at_and_writes_fields_in_one_update(alice):
    session = backdate(conversation(alice, 4))
    before = session.updated_at
    written = session.touch(title="renamed", compression_count=F("compression_count") + 2)
    assert session.updated_at == written > before
    assert session.title == "renamed"
    stored = Session.objects.get(pk=session.pk)
    assert (stored.updated_at, stored.title, stored.compression_count) == (written, "renamed", 2)


def test_the_rotation_commit_touches_the_parent_it_ends(alice):
    parent = backdate(conversation(alice))
    before = parent.updated_at
    run = request_compaction(session=parent, config_overrides=SMALL_TAIL, run_now=True)
    assert run.status == Compaction.Status.COMMITTED
    parent.refresh_from_db()
    assert parent.is_rotated
    assert parent.end_reason == Session.EndReason.COMPRESSION
    assert parent.updated_at > before  # the pages cached under the old stamp are stale now


def test_undo_ends_the_child_as_undone_and_reopens_the_parent(alice):
    parent = conversation(alice)
    run = request_compaction(session=parent, config_overrides=SMALL_TAIL, run_now=True)
    backdate(parent)
    before = Session.objects.get(pk=parent.pk).updated_at
    undo_compaction(run)
    parent.refresh_from_db()
    child = Session.objects.get(pk=run.result_session_id)
    assert not parent.is_rotated
    assert parent.end_reason == Session.EndReason.LIVE
    assert parent.updated_at > before
    assert child.end_reason == Session.EndReason.UNDONE


def test_in_progress_counts_real_queued_and_running_runs_only(alice):
    session = conversation(alice, 4)
    made = {
        status: Compaction.objects.create(session=session, status=status)
        for status in (Compaction.Status.RUNNING, Compaction.Status.COMMITTED)
    }
    Compaction.objects.create(
        session=session, status=Compaction.Status.QUEUED, trigger=Compaction.Trigger.WHAT_IF
    )
    assert list(Compaction.objects.in_progress()) == [made[Compaction.Status.RUNNING]]
    assert list(Compaction.objects.committed()) == [made[Compaction.Status.COMMITTED]]
    assert list(Compaction.objects.in_progress().filter(session__owner=alice)) == [
        made[Compaction.Status.RUNNING]
    ]
