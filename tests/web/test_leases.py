"""Leases that heal in seconds: heartbeat, deadline, queueing behind a what-if, one live run
per session at request time, transient database errors, and the worker health report."""

import sqlite3
import threading
import time
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.utils import timezone

from hermes_web.models import Compaction, Message, Session, SessionLock, WorkerHeartbeat
from hermes_web.services.compactions import request_compaction, run_compaction, stranded_runs
from hermes_web.services.leases import Heartbeat, acquire_lock, release_lock
from tests.conftest import point_app_at_broker, wait_for
from tests.fake_openai import FakeOpenAIServer
from tests.web.compaction_helpers import SMALL_TAIL, conversation, use_summary_server

pytestmark = pytest.mark.django_db


@pytest.fixture
def idle_broker(tmp_path, settings):
    """Tasks go to a fresh embedded broker that no worker consumes (they stay queued)."""
    from hermes_web.celery import app

    original = app.conf.broker_url
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    point_app_at_broker(f"sqla+sqlite:///{tmp_path / 'idle-broker.sqlite3'}")
    yield
    point_app_at_broker(original)


def _in_thread(fn, *args):
    result: dict = {}

    def work():
        try:
            result["value"] = fn(*args)
        except BaseException as error:  # re-raised by the caller
            result["error"] = error
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    return thread, result


# --- the lease and its heartbeat -------------------------------------------------------


def test_the_default_lease_is_short_and_renewed_more_often_than_it_lasts(settings):
    assert settings.HERMES_LOCK_LEASE_SECONDS <= 20
    assert settings.HERMES_LEASE_HEARTBEAT_SECONDS * 2 < settings.HERMES_LOCK_LEASE_SECONDS
    # Kill to takeover: the lease lapses, then the next sweep re-sends the run.
    assert settings.HERMES_LOCK_LEASE_SECONDS + settings.HERMES_RECOVERY_SWEEP_SECONDS <= 30


@pytest.mark.django_db(transaction=True)
def test_a_working_run_keeps_its_lease_past_the_lease_length(alice, settings):
    """Lease 3 s, summarizer 7 s: the heartbeat keeps the run's lease, nobody takes over."""
    settings.HERMES_LOCK_LEASE_SECONDS = 3
    settings.HERMES_LEASE_HEARTBEAT_SECONDS = 0.3
    session = conversation(alice)
    with FakeOpenAIServer(default_reply={"sleep": 7, "content": "## Goal\nDone."}) as server:
        use_summary_server(settings, server)
        run = request_compaction(session=session, config_overrides=SMALL_TAIL)
        thread, result = _in_thread(run_compaction, run.pk)
        wait_for(lambda: server.requests, timeout=30, message="the summary request")
        time.sleep(4.5)  # past the 3 s lease: only the heartbeat keeps it alive
        assert not acquire_lock(session.pk, "intruder")
        assert run.pk not in stranded_runs()
        thread.join(30)
    assert "error" not in result, result
    run.refresh_from_db()
    assert run.status == Compaction.Status.COMMITTED, (run.status, run.error)
    assert run.attempts == 1
    assert SessionLock.objects.get(session=session).holder == ""


@pytest.mark.django_db(transaction=True)
def test_a_lease_whose_heartbeat_stopped_lapses_and_the_run_is_stranded(alice, settings):
    settings.HERMES_LOCK_LEASE_SECONDS = 1
    session = conversation(alice, n_messages=4)
    run = Compaction.objects.create(
        session=session,
        status=Compaction.Status.RUNNING,
        started_at=timezone.now() - timedelta(seconds=30),
        attempts=1,
    )
    holder = f"{run.public_id}:dead-worker"
    assert acquire_lock(session.pk, holder)
    with Heartbeat(session.pk, holder, interval=0.2) as beat:
        time.sleep(1.5)
        assert beat.renewals >= 3
        assert stranded_runs() == []  # alive: renewed past its 1 s lease
    time.sleep(1.2)  # the "worker" stopped beating
    assert stranded_runs() == [run.pk]
    assert acquire_lock(session.pk, "next")  # and the lease can be taken over


@pytest.mark.django_db(transaction=True)
def test_a_run_past_its_deadline_fails_and_writes_nothing(alice, settings):
    """The threads pool ignores Celery's time limits: the heartbeat enforces the deadline."""
    settings.HERMES_RUN_DEADLINE_SECONDS = 1
    settings.HERMES_LEASE_HEARTBEAT_SECONDS = 0.2
    session = conversation(alice)
    before = list(Message.objects.values_list("pk", "position", "active"))
    with FakeOpenAIServer(default_reply={"sleep": 3, "content": "## Goal\nLate."}) as server:
        use_summary_server(settings, server)
        run = request_compaction(session=session, config_overrides=SMALL_TAIL)
        thread, result = _in_thread(run_compaction, run.pk)
        wait_for(
            lambda: Compaction.objects.get(pk=run.pk).status == Compaction.Status.FAILED,
            timeout=10,
            message="the deadline to fail the run",
        )
        # The lease is free at once: a new run need not wait for the hung one.
        assert SessionLock.objects.get(session=session).holder == ""
        thread.join(30)
    assert "error" not in result, result
    run.refresh_from_db()
    assert run.status == Compaction.Status.FAILED
    assert "timed out" in run.error
    session.refresh_from_db()
    assert session.end_reason == ""
    assert Session.objects.count() == 1
    assert list(Message.objects.values_list("pk", "position", "active")) == before


# --- one live run per session, and queueing behind a what-if --------------------------


@pytest.mark.django_db(transaction=True)
def test_a_manual_run_behind_a_what_if_runs_after_it(alice, settings):
    """The what-if holds the lease; the manual one waits queued, then commits after it."""
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the task sent when the what-if ends runs inline
    from hermes_web.celery import app

    app.conf.task_always_eager = True
    session = conversation(alice)
    try:
        with FakeOpenAIServer(default_reply={"sleep": 2, "content": "## Goal\nDone."}) as server:
            use_summary_server(settings, server)
            what_if = Compaction.objects.create(
                session=session,
                trigger=Compaction.Trigger.WHAT_IF,
                config=SMALL_TAIL | {"context_length": 32_000},
                summarizer="auto",
            )
            thread, result = _in_thread(run_compaction, what_if.pk)
            wait_for(lambda: server.requests, timeout=30, message="the what-if's summary request")
            manual = request_compaction(session=session, config_overrides=SMALL_TAIL, run_now=True)
            assert manual.status == Compaction.Status.QUEUED  # not skipped/locked
            thread.join(60)
    finally:
        app.conf.task_always_eager = False
    assert "error" not in result, result
    what_if.refresh_from_db()
    manual.refresh_from_db()
    assert what_if.status == Compaction.Status.DRY_RUN
    assert manual.status == Compaction.Status.COMMITTED, (manual.status, manual.reason)
    assert manual.started_at >= what_if.finished_at
    assert Session.objects.filter(parent=session).count() == 1


@pytest.mark.django_db(transaction=True)
def test_sixteen_simultaneous_requests_get_exactly_one_202(alice, idle_broker):
    session = conversation(alice, n_messages=20)
    clients = []
    for _ in range(16):
        client = Client()
        client.force_login(alice)
        clients.append(client)
    barrier = threading.Barrier(16)
    answers: list = []

    def post(client):
        barrier.wait(10)
        response = client.post(
            f"/api/sessions/{session.public_id}/compactions",
            {"summarizer": "deterministic"},
            content_type="application/json",
        )
        answers.append((response.status_code, response.json()))

    threads = [_in_thread(post, c)[0] for c in clients]
    for thread in threads:
        thread.join(60)
    codes = sorted(code for code, _ in answers)
    assert codes == [202] + [409] * 15, answers
    [accepted] = [body for code, body in answers if code == 202]
    refusals = [body["detail"] for code, body in answers if code == 409]
    assert all(accepted["id"] in detail and "already" in detail for detail in refusals), refusals
    assert Compaction.objects.filter(session=session).count() == 1


def test_the_database_refuses_a_second_live_run_of_a_session(alice):
    from django.db import IntegrityError, transaction

    session = conversation(alice, n_messages=4)
    Compaction.objects.create(session=session, status=Compaction.Status.RUNNING)
    with pytest.raises(IntegrityError), transaction.atomic():
        Compaction.objects.create(session=session, status=Compaction.Status.QUEUED)
    # Dry runs and finished runs are not limited.
    Compaction.objects.create(session=session, trigger=Compaction.Trigger.WHAT_IF)
    Compaction.objects.create(session=session, status=Compaction.Status.SKIPPED)


# --- transient database errors ---------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_commit_blocked_by_a_locked_database_is_retried_not_failed(alice, settings):
    """SQLite stays locked by another writer past the busy timeout during the commit: the
    commit is retried with backoff and lands once the writer lets go."""
    if connection.vendor != "sqlite":
        pytest.skip("holds SQLite's write lock from outside")
    settings.HERMES_LEASE_HEARTBEAT_SECONDS = 30  # keep the heartbeat out of the way
    db_settings = connection.settings_dict
    old_timeout = db_settings["OPTIONS"].get("timeout")
    db_settings["OPTIONS"]["timeout"] = 0.5  # new connections (the run's thread) give up fast
    session = conversation(alice)
    try:
        with FakeOpenAIServer(default_reply={"sleep": 1, "content": "## Goal\nDone."}) as server:
            use_summary_server(settings, server)
            run = request_compaction(session=session, config_overrides=SMALL_TAIL)
            thread, result = _in_thread(run_compaction, run.pk)
            wait_for(lambda: server.requests, timeout=30, message="the summary request")
            blocker = sqlite3.connect(db_settings["NAME"], timeout=10, isolation_level=None)
            blocker.execute("BEGIN IMMEDIATE")  # the write lock, held across the commit
            time.sleep(4)
            blocker.execute("ROLLBACK")
            blocker.close()
            thread.join(60)
    finally:
        db_settings["OPTIONS"]["timeout"] = old_timeout
    assert "error" not in result, result
    run.refresh_from_db()
    assert run.status == Compaction.Status.COMMITTED, (run.status, run.error)
    assert Session.objects.filter(parent=session).count() == 1


# --- worker health ---------------------------------------------------------------------


def test_healthz_reports_jobs_waiting_without_a_worker(client, alice):
    cache.clear()
    session = conversation(alice, n_messages=4)
    run = Compaction.objects.create(session=session)
    Compaction.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(minutes=3))
    body = client.get("/healthz")
    assert body.status_code == 503
    data = body.json()
    assert data["status"] == "degraded"
    assert data["workers"]["ok"] is False
    assert data["workers"]["seen_last_minute"] == 0
    assert data["workers"]["oldest_queued_seconds"] >= 180

    WorkerHeartbeat.objects.create(name="w1@host:1", last_seen=timezone.now())
    data = client.get("/healthz").json()
    assert data["status"] == "ok"
    assert data["workers"]["seen_last_minute"] == 1
    assert data["workers"]["names"] == ["w1@host:1"]

    WorkerHeartbeat.objects.update(last_seen=timezone.now() - timedelta(minutes=2))
    assert client.get("/healthz").json()["workers"]["seen_last_minute"] == 0


def test_the_ui_says_no_worker_is_running_while_jobs_wait(alice_client, alice):
    cache.clear()
    assert "No worker is running" not in alice_client.get("/conversations/").text
    session = conversation(alice, n_messages=4)
    run = Compaction.objects.create(session=session)
    Compaction.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(minutes=1))
    cache.clear()
    assert "No worker is running" in alice_client.get("/conversations/").text
    WorkerHeartbeat.objects.create(name="w1@host:1", last_seen=timezone.now())
    cache.clear()
    assert "No worker is running" not in alice_client.get("/conversations/").text


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_stamps_its_heartbeat(celery_worker_process):
    wait_for(
        lambda: WorkerHeartbeat.objects.exists(),
        timeout=60,
        worker=celery_worker_process,
        message=lambda: f"a heartbeat row; log:\n{celery_worker_process.log()}",
    )
    beat = WorkerHeartbeat.objects.get()
    assert "compaction" in beat.queues
    assert timezone.now() - beat.last_seen < timedelta(minutes=1)


def test_release_only_frees_the_holders_own_lease(alice):
    session = conversation(alice, n_messages=4)
    assert acquire_lock(session.pk, "a")
    release_lock(session.pk, "b")
    assert SessionLock.objects.get(session=session).holder == "a"


def test_committing_a_what_if_while_a_run_is_queued_is_409_not_500(alice, alice_client):
    from tests.web.inspector_seed import compact_now, seed_conversation

    session = seed_conversation(alice, n=120)
    dry = compact_now(
        session, alice, mode="in_place", trigger="what_if", overrides={"tail_token_budget": 1500}
    )
    queued = Compaction.objects.create(session=session, trigger=Compaction.Trigger.MANUAL)
    response = alice_client.post(f"/compactions/{dry.public_id}/commit/")
    assert response.status_code == 409
    assert queued.public_id in response.content.decode()
    assert Compaction.objects.filter(session=session, trigger="manual").count() == 1
