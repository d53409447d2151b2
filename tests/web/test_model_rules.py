"""Domain rules that live on the models: end reasons, touch(), the compaction querysets."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from hermes_web.models import Compaction, Message, Session
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


def test_real_leaves_out_what_ifs_and_for_lineage_spans_the_rotation_chain(alice, bob):
    parent = conversation(alice)
    rotation = request_compaction(session=parent, config_overrides=SMALL_TAIL, run_now=True)
    child = rotation.result_session
    what_if = Compaction.objects.create(
        session=child, status=Compaction.Status.DRY_RUN, trigger=Compaction.Trigger.WHAT_IF
    )
    stranger = Compaction.objects.create(session=conversation(bob, 4))
    assert set(Compaction.objects.for_lineage(child)) == {rotation, what_if}
    assert set(Compaction.objects.for_lineage(parent)) == {rotation, what_if}
    assert set(Compaction.objects.for_lineage(parent).real()) == {rotation}
    assert stranger in Compaction.objects.real()
    chain_messages = parent.messages.count() + child.messages.count()
    assert Message.objects.for_lineage(child).count() == chain_messages


def test_finish_never_overwrites_a_finished_run(alice):
    session = conversation(alice, 4)
    running = Compaction.objects.create(session=session, status=Compaction.Status.RUNNING)
    assert running.finish(Compaction.Status.SKIPPED, reason="nothing").status == "skipped"
    assert running.finished_at is not None
    assert running.reason == "nothing"
    assert running.finish(Compaction.Status.FAILED, error="late").status == "skipped"
    assert Compaction.objects.get(pk=running.pk).error == ""


def test_mark_failed_changes_only_a_run_in_progress(alice):
    session = conversation(alice, 4)
    queued = Compaction.objects.create(session=session)
    assert Compaction(pk=queued.pk).mark_failed("x" * 3000)
    queued.refresh_from_db()
    assert (queued.status, len(queued.error)) == (Compaction.Status.FAILED, 2000)
    assert not queued.mark_failed("again")
    assert Compaction.objects.get(pk=queued.pk).error == "x" * 2000


@pytest.mark.parametrize("mode", ["rotation", "in_place"])
def test_input_and_final_rows_are_what_the_engine_read_and_wrote(alice, mode):
    session = conversation(alice)
    before = [m.to_engine() for m in session.messages.active()]
    run = request_compaction(session=session, mode=mode, config_overrides=SMALL_TAIL, run_now=True)
    assert run.status == Compaction.Status.COMMITTED
    assert [m.to_engine() for m in run.input_rows()] == before
    final = list(run.final_rows(limit=500))
    assert [m.pk for m in final] == [m.pk for m in run.result_session.messages.active()]
    assert sum(m.is_summary for m in final) == 1
    assert len(run.final_rows(limit=3)) == 3


def test_engine_dict_is_to_engine_of_the_same_columns(alice):
    session = conversation(alice, 4)
    tool = session.messages.create(
        position=99, role="tool", content="out", tool_call_id="c1", tool_name="ls", reasoning=None
    )
    row = Message.objects.filter(pk=tool.pk).values_list(*Message.ENGINE_COLUMNS).get()
    assert Message.engine_dict(*row) == tool.to_engine()
    assert tool.to_engine() == {
        "role": "tool",
        "content": "out",
        "tool_call_id": "c1",
        "name": "ls",
    }
