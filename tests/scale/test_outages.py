"""Proofs 4 and 5: Redis restarted with jobs queued; PostgreSQL restarted while a run is in flight."""

import time

import pytest
import redis
from django.db import connection

from hermes_web.models import Compaction, Message, Session
from hermes_web.services.compactions import request_compaction
from tests.scale.harness import build_session, dump_table, orphan_report, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _queued(client: redis.Redis) -> int:
    return sum(
        client.llen(key) for key in client.keys("compaction*") if client.type(key) == b"list"
    )


def test_jobs_queued_across_a_redis_restart_each_run_exactly_once(spawn, owner, redis_server):
    sessions = [build_session(owner, 300, seed=40 + i) for i in range(6)]
    runs = [
        request_compaction(session=s, trigger="manual", summarizer="deterministic")
        for s in sessions
    ]
    client = redis.Redis(host="127.0.0.1", port=redis_server.port)
    try:
        assert _queued(client) == len(runs)  # no worker runs: all six wait in Redis
        client.close()

        stopped = time.monotonic()
        redis_server.stop()
        with pytest.raises(redis.ConnectionError):
            client.ping()
        redis_server.start()  # same data folder and port: the append-only file brings the queue back
        downtime = time.monotonic() - stopped
        assert _queued(client) == len(runs)
    finally:
        client.close()

    workers = spawn.workers(2)
    ids = [r.pk for r in runs]
    wait_until(
        lambda: (
            Compaction.objects.filter(pk__in=ids, finished_at__isnull=False).count() == len(ids)
        ),
        90,
        lambda: list(Compaction.objects.filter(pk__in=ids).values_list("status", "attempts")),
        workers=workers,
    )

    for run in Compaction.objects.filter(pk__in=ids):
        assert run.status == Compaction.Status.COMMITTED, (run.status, run.reason, run.error)
        assert run.attempts == 1  # claimed once: no delivery was lost or duplicated
    for session in sessions:
        assert Session.objects.filter(parent_id=session.pk).count() == 1
    received = sum(w.log().count("Task hermes_web.tasks.compact_session[") for w in workers) // 2
    assert received == len(
        ids
    )  # each job was received once and finished once (two log lines per job)
    assert orphan_report() == dict.fromkeys(orphan_report(), 0)
    print(
        f"\n[broker outage] {len(ids)} jobs queued, Redis down and back in {downtime:.1f}s, "
        f"then {len(workers)} workers ran each exactly once (attempts=1, one child each)"
    )


@pytest.mark.parametrize("mode", ["rotation", "in_place"])
def test_postgres_restart_during_a_run_is_retried_and_commits_once(
    spawn, owner, slow_llm, postgres_server, mode
):
    session = build_session(owner, 400, seed=50, compaction_mode=mode)
    # The first summary takes 8 s: time to restart PostgreSQL under it; later ones 3 s.
    slow_llm.enqueue(
        {"sleep": 8, "content": "## Active Task\nFirst attempt.\n\n## Goal\nSurvive a restart."}
    )
    env = slow_llm.worker_env  # default lease, heartbeat and database-retry settings
    [worker] = spawn.workers(1, extra_env=env)
    before = {
        "sessions": dump_table("hermes_web_session"),
        "messages": dump_table("hermes_web_message"),
    }
    messages_before = Message.objects.count()

    run = request_compaction(session=session, trigger="manual", mode=mode)
    wait_until(lambda: slow_llm.requests, 60, "the summary request", workers=[worker])
    connection.close()
    restarted = time.monotonic()
    postgres_server.stop()  # fast shutdown: every open connection, the worker's included, is cut
    # Throwaway test cluster, as run_with_services started it (restart() would turn fsync back on).
    postgres_server.start(durable=False)
    restart_seconds = time.monotonic() - restarted

    wait_until(
        lambda: Compaction.objects.get(pk=run.pk).is_finished,
        120,
        lambda: (
            f"the run to finish (now {Compaction.objects.filter(pk=run.pk).values_list('status', 'attempts', 'error').first()})"
        ),
        workers=[worker],
    )
    assert worker.alive()
    run.refresh_from_db()
    # Retried through the restart (in place, then by the task), not failed.
    assert run.status == Compaction.Status.COMMITTED, (run.status, run.error)
    assert before["sessions"]  # the snapshot was taken
    session.refresh_from_db()
    if mode == "rotation":
        children = list(Session.objects.filter(parent_id=session.pk))
        assert len(children) == 1
        assert Message.objects.filter(session=children[0], is_summary=True).count() == 1
        assert Message.objects.filter(session=session).count() == messages_before
    else:
        assert session.compression_count == 1
        assert Message.objects.filter(session=session, active=True, is_summary=True).count() == 1
        archived = Message.objects.filter(session=session, archived=True)
        assert archived.count() > 0
        assert archived.exclude(archived_by=run).count() == 0
        assert Message.objects.filter(session=session, active=True, archived=True).count() == 0
    assert Compaction.objects.filter(session=session).count() == 1
    assert orphan_report() == dict.fromkeys(orphan_report(), 0)
    print(
        f"\n[database outage:{mode}] PostgreSQL restarted in {restart_seconds:.1f}s mid-summary; run "
        f"{run.status} after {run.attempts} attempt(s){': ' + run.error[:120] if run.error else ''}; nothing half-written"
    )
