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


# --- the embedded setup, as `make run` starts it -----------------------------------------


def _procfile_argv(name: str, concurrency: int = 4) -> list[str]:
    """A command of the Procfile `make run` starts (``worker`` or ``beat``), with its
    variables filled in."""
    import shlex
    import sys

    from tests.conftest import ROOT

    line = next(
        line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith(f"{name}:")
    )
    command = line.split(":", 1)[1].strip()
    command = command.replace("${HERMES_WORKER_CONCURRENCY}", str(concurrency))
    command = command.replace("${HERMES_WORKER_LOGLEVEL}", "info")
    argv = shlex.split(command)
    assert argv[0] == "celery", argv
    if name == "worker":
        assert "--pool=threads" in argv, argv
    return [sys.executable, "-m", *argv]


class EmbeddedWorker:
    """`make run`'s worker (threads pool, SQLite broker) and its beat, each in its own
    process group; killed together, as honcho stops the others when one dies."""

    def __init__(self, broker_url: str, data_dir, log_path, extra_env: dict):
        import os
        import subprocess

        from django.conf import settings
        from django.db import connection

        from tests.conftest import ROOT, database_url_for

        data_dir.mkdir(exist_ok=True)
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        env = {
            **os.environ,
            "DATABASE_URL": database_url_for(connection.settings_dict),
            "SECRET_KEY": settings.SECRET_KEY,
            "CELERY_BROKER_URL": broker_url,
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "HERMES_DATA_DIR": str(data_dir),  # beat's schedule file
            **extra_env,
        }
        # No lease, heartbeat or sweep settings: the defaults are what is proven here.
        for name in list(env):
            if name.startswith(("HERMES_LOCK_", "HERMES_LEASE_", "HERMES_RECOVERY_")):
                del env[name]
        self.procs = [
            subprocess.Popen(
                _procfile_argv(name),
                cwd=ROOT,
                env=env,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            for name in ("worker", "beat")
        ]
        self.proc = self.procs[0]  # the worker

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        import contextlib
        import os
        import signal

        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def stop(self) -> None:
        import contextlib
        import os
        import signal
        import subprocess

        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(20)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            if proc.poll() is None:
                proc.wait(10)
        self._log.close()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["rotation", "in_place"])
def test_embedded_worker_killed_mid_compaction_is_taken_over_with_default_leases(
    alice, tmp_path, settings, mode
):
    """SIGKILL `make run`'s worker while its run waits on the summarizer; a fresh worker
    (as a restarted `make run` would start) commits the run once within 60 s of the kill."""
    import time

    from hermes_web.celery import app
    from hermes_web.models import Message, Session
    from hermes_web.services.compactions import request_compaction
    from tests.conftest import point_app_at_broker, wait_for
    from tests.fake_openai import FakeOpenAIServer
    from tests.web.compaction_helpers import SMALL_TAIL, conversation

    assert settings.HERMES_LOCK_LEASE_SECONDS <= 20  # the default, not a test override
    session = conversation(alice, compaction_mode=mode)
    before = list(Message.objects.values_list("pk", "session_id", "position", "active"))
    original = app.conf.broker_url
    broker = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    point_app_at_broker(broker)
    server = FakeOpenAIServer(
        default_reply={"content": "## Active Task\nRecovered.\n\n## Goal\nSurvive a kill."}
    ).start()
    server.enqueue({"sleep": 90, "content": "never delivered: the worker is dead by then"})
    env = {
        "HERMES_SUMMARY_MODEL": "openai/fake-summary",
        "HERMES_SUMMARY_API_BASE": server.base_url,
        "HERMES_SUMMARY_API_KEY": "x",
        "HERMES_LLM_TIMEOUT": "120",
    }
    workers = []
    try:
        victim = EmbeddedWorker(broker, tmp_path / "data", tmp_path / "victim.log", env)
        workers.append(victim)
        run = request_compaction(session=session, mode=mode, config_overrides=SMALL_TAIL)
        wait_for(
            lambda: server.requests,
            timeout=90,
            worker=victim,
            message=lambda: f"the summary request; log:\n{victim.log()}",
        )
        victim.kill()
        killed_at = time.monotonic()
        run.refresh_from_db()
        assert run.status == Compaction.Status.RUNNING
        assert list(Message.objects.values_list("pk", "session_id", "position", "active")) == (
            before
        )

        rescuer = EmbeddedWorker(broker, tmp_path / "data", tmp_path / "rescuer.log", env)
        workers.append(rescuer)
        wait_for(
            lambda: Compaction.objects.get(pk=run.pk).is_finished,
            timeout=60 - (time.monotonic() - killed_at),
            interval=0.2,
            worker=rescuer,
            message=lambda: (
                f"the run to be taken over and finish (now {Compaction.objects.get(pk=run.pk).status}); "
                f"log:\n{rescuer.log()[-4000:]}"
            ),
        )
        recovered = time.monotonic() - killed_at
    finally:
        for worker in workers:
            worker.stop()
        server.stop()
        point_app_at_broker(original)
    run.refresh_from_db()
    assert run.status == Compaction.Status.COMMITTED, (run.status, run.error)
    assert run.attempts == 2
    assert run.summarizer != "deterministic"  # the rescuer's own summary call, not a fallback
    assert len(server.requests) == 2
    assert Compaction.objects.filter(session=session).count() == 1
    if mode == "rotation":
        assert Session.objects.filter(parent=session).count() == 1
    else:
        assert Message.objects.filter(session=session, active=True, is_summary=True).count() == 1
    assert SessionLock.objects.get(session=session).holder == ""
    print(f"\n[embedded crash:{mode}] committed once, {recovered:.1f}s after the kill")
