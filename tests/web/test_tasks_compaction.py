"""compact_session through real Celery worker processes: end to end, and a worker killed mid-run."""

import signal

import pytest

from hermes_web.models import Message, Session, SessionLock
from hermes_web.services.compactions import request_compaction
from hermes_web.tasks import compact_session
from tests.conftest import WorkerProcess, point_app_at_broker, wait_for
from tests.fake_openai import FakeOpenAIServer
from tests.web.compaction_helpers import SMALL_TAIL, conversation

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def broker(tmp_path, settings):
    """A fresh embedded broker this process publishes to; the app's broker is restored after."""
    from hermes_web.celery import app

    original = app.conf.broker_url
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    point_app_at_broker(url)
    yield url
    point_app_at_broker(original)


def _status(run):
    run.refresh_from_db()
    return run.status


def test_a_queued_compaction_is_committed_by_a_real_worker(alice, celery_worker_process):
    session = conversation(alice)
    run = request_compaction(session=session, requested_by=alice, config_overrides=SMALL_TAIL)
    wait_for(
        lambda: _status(run) == "committed",
        timeout=60,
        worker=celery_worker_process,
        message=lambda: (
            f"the run to commit (status {run.status}); log:\n{celery_worker_process.log()}"
        ),
    )
    session.refresh_from_db()
    assert session.end_reason == Session.EndReason.COMPRESSION
    assert run.result_session.parent == session
    assert run.attempts == 1
    # A redelivered task is a no-op.
    compact_session.delay(run.pk)
    other = request_compaction(session=run.result_session, trigger="what_if")
    wait_for(lambda: _status(other) == "dry_run", timeout=60, worker=celery_worker_process)
    assert Session.objects.filter(parent=session).count() == 1
    assert _status(run) == "committed"


def test_a_worker_killed_mid_run_leaves_data_intact_and_a_retry_commits_once(
    alice, tmp_path, settings, broker
):
    session = conversation(alice, compaction_mode="in_place")
    before = list(
        Message.objects.filter(session=session).values_list("pk", "position", "active", "archived")
    )
    settings.HERMES_LOCK_LEASE_SECONDS = 3
    with FakeOpenAIServer(default_reply={"sleep": 120, "content": "never delivered"}) as server:
        slow_env = {
            "HERMES_SUMMARY_MODEL": "openai/slow-summary",
            "HERMES_SUMMARY_API_BASE": server.base_url,
            "HERMES_SUMMARY_API_KEY": "x",
            "HERMES_LOCK_LEASE_SECONDS": "3",
        }
        doomed = WorkerProcess(
            broker, tmp_path / "doomed.log", extra_env=slow_env, queues="compaction"
        )
        try:
            run = request_compaction(session=session, mode="in_place", config_overrides=SMALL_TAIL)
            wait_for(
                lambda: server.requests,
                timeout=60,
                worker=doomed,
                message=lambda: f"the summarizer call; log:\n{doomed.log()}",
            )
            doomed.proc.send_signal(signal.SIGKILL)
            doomed.proc.wait(10)
        finally:
            doomed.stop()

    # Killed between the engine and the commit: nothing changed, the run is stuck "running".
    assert _status(run) == "running"
    after = list(
        Message.objects.filter(session=session).values_list("pk", "position", "active", "archived")
    )
    assert after == before
    session.refresh_from_db()
    assert session.compression_count == 0
    assert SessionLock.objects.get(session=session).holder.startswith(run.public_id)

    rescuer = WorkerProcess(
        broker,
        tmp_path / "rescuer.log",
        extra_env={"HERMES_LOCK_LEASE_SECONDS": "3"},
        queues="compaction",
    )
    try:
        # Sent again (a redelivery); while the dead worker's lease lasts it waits, then commits.
        compact_session.delay(run.pk)
        wait_for(
            lambda: _status(run) == "committed",
            timeout=60,
            worker=rescuer,
            message=lambda: f"the retry to commit (status {run.status}); log:\n{rescuer.log()}",
        )
    finally:
        rescuer.stop()
    assert run.attempts == 2
    assert run.summarizer == "deterministic"
    assert Message.objects.filter(session=session, archived_by=run).count() == len(before)
    assert Message.objects.filter(session=session, active=True, is_summary=True).count() == 1
    session.refresh_from_db()
    assert session.compression_count == 1
    assert SessionLock.objects.get(session=session).holder == ""
