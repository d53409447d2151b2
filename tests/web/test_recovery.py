"""Stranded compactions (task lost with a killed worker or a broker outage) are found and re-sent."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hermes_web.models import Compaction, SessionLock
from hermes_web.services.compactions import acquire_lock, stranded_runs
from hermes_web.services.sessions import append_message, create_session
from hermes_web.tasks import recover_stranded_runs

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(alice):
    session = create_session(owner=alice, title="stranded")
    append_message(session, role="user", content="hello")
    return session


def make_run(session, **fields):
    return Compaction.objects.create(session=session, **fields)


def test_fresh_queued_runs_are_left_to_the_broker(session):
    make_run(session, status=Compaction.Status.QUEUED)
    assert stranded_runs() == []


def test_old_queued_runs_are_stranded(session):
    old = make_run(
        session, status=Compaction.Status.QUEUED, queued_at=timezone.now() - timedelta(minutes=5)
    )
    assert stranded_runs() == [old.pk]


def test_running_without_a_live_lease_is_stranded_but_a_held_run_is_not(session, alice):
    started = timezone.now() - timedelta(minutes=1)
    dead = make_run(session, status=Compaction.Status.RUNNING, started_at=started)
    other = create_session(owner=alice, title="held")
    held = make_run(other, status=Compaction.Status.RUNNING, started_at=started)
    assert acquire_lock(other.pk, f"{held.public_id}:worker")
    assert stranded_runs() == [dead.pk]
    # Once the held run's lease expires, it is stranded too.
    SessionLock.objects.filter(session=other).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert sorted(stranded_runs()) == sorted([dead.pk, held.pk])


def test_finished_runs_are_never_resent(session):
    long_ago = timezone.now() - timedelta(hours=1)
    for status in Compaction.FINISHED:
        make_run(session, status=status, queued_at=long_ago, started_at=long_ago)
    assert stranded_runs() == []


def test_recovery_resends_and_the_rerun_commits_once(
    session, settings, django_capture_on_commit_callbacks
):
    from hermes_web.celery import app

    for i in range(30):
        append_message(
            session, role="user" if i % 2 == 0 else "assistant", content=f"message {i} " + "x" * 400
        )
    run = make_run(
        session,
        status=Compaction.Status.RUNNING,
        started_at=timezone.now() - timedelta(minutes=1),
        trigger=Compaction.Trigger.MANUAL,
        summarizer="deterministic",
        config={"tail_token_budget": 500, "context_length": 200_000},
    )
    app.conf.task_always_eager = True
    try:
        assert recover_stranded_runs() == 1
    finally:
        app.conf.task_always_eager = False
    run.refresh_from_db()
    assert run.status == Compaction.Status.COMMITTED
    assert run.attempts == 1
    assert run.result_session.parent_id == session.pk
    assert recover_stranded_runs() == 0


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_broker_leaves_the_run_queued_for_the_sweep(alice, caplog):
    from hermes_web.celery import app
    from hermes_web.services.compactions import request_compaction
    from tests.conftest import point_app_at_broker

    session = create_session(owner=alice, title="broker down")
    append_message(session, role="user", content="hello")
    original = (app.conf.broker_url, app.conf.broker_transport_options)
    point_app_at_broker("redis://127.0.0.1:1/0")
    app.conf.broker_transport_options = {"max_retries": 0}
    try:
        run = request_compaction(session=session, summarizer="deterministic")
    finally:
        app.conf.broker_transport_options = original[1]
        point_app_at_broker(original[0])
    run.refresh_from_db()
    assert run.status == Compaction.Status.QUEUED
    assert "it will be re-sent" in caplog.text
    Compaction.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(minutes=5))
    assert stranded_runs() == [run.pk]
