"""Proof 3: a worker SIGKILLed after the summary, inside its commit, leaves the session untouched.

No fault-injection hook is needed: the test holds a row lock on the run's Compaction row
(FOR NO KEY UPDATE, which foreign-key checks do not conflict with), so the worker's commit
transaction writes everything else (the child session and its messages, or the archived and
new rows in place) and then waits on the run's final status UPDATE. PostgreSQL shows that
wait; the test kills the worker's whole process group there. With the DEFAULT lease
settings (no overrides: a short lease renewed by a heartbeat), the dead worker's lease lapses
within seconds, the second worker's recovery sweep sends the run again, and that worker
commits it exactly once, within 60 s of the kill.
"""

import os
import threading
import time

import psycopg
import pytest
from django.db import connection

from hermes_web.models import Compaction, Message, Session, SessionLock
from hermes_web.services.compactions import request_compaction
from tests.scale.harness import build_session, dump_table, orphan_report, table_counts, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TAKEOVER_BUDGET = 60  # seconds from the kill to the committed run
# Settings left at their defaults in the workers, even if this process's environment has them.
DEFAULTED = (
    "HERMES_LOCK_",
    "HERMES_LEASE_",
    "HERMES_RECOVERY_",
    "HERMES_BROKER_VISIBILITY",
    "HERMES_BROKER_RESTORE",
)


def _conninfo() -> str:
    s = connection.settings_dict
    return f"host={s['HOST']} port={s['PORT']} dbname={s['NAME']} user={s['USER']}"


def _snapshot() -> dict[str, list[str]]:
    return {
        "sessions": dump_table("hermes_web_session"),
        "messages": dump_table("hermes_web_message"),
    }


def _blocked_commit() -> dict | None:
    """The worker backend waiting on our row lock in its final UPDATE, with the tables it wrote."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
            "AND query LIKE 'UPDATE \"hermes_web_compaction\" SET%%'"
        )
        row = cursor.fetchone()
        if row is None:
            return None
        cursor.execute(
            "SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "WHERE l.pid = %s AND l.mode = 'RowExclusiveLock' AND c.relkind = 'r'",
            [row[0]],
        )
        return {"pid": row[0], "wrote": sorted(r[0] for r in cursor.fetchall())}


@pytest.mark.parametrize("mode", ["rotation", "in_place"])
def test_sigkill_inside_commit_leaves_session_identical_and_redelivery_commits_once(
    spawn, owner, slow_llm, mode
):
    session = build_session(owner, 500, seed=3, compaction_mode=mode)
    # Default lease, heartbeat, sweep and broker visibility settings: nothing tuned for the test.
    env = {**slow_llm.worker_env}
    for name in list(os.environ):
        if name.startswith(DEFAULTED):
            env[name] = ""
    [victim] = spawn.workers(1, extra_env=env)
    before = _snapshot()
    counts_before = table_counts()

    run = request_compaction(session=session, trigger="manual", mode=mode)
    # The summary request reached the LLM: the engine runs, and the run's row will not be
    # touched again until the commit, so it is safe to lock it now.
    wait_until(lambda: slow_llm.requests, 60, "the summary request", workers=[victim])

    release = threading.Event()
    locked = threading.Event()

    def hold_row_lock() -> None:
        with psycopg.connect(_conninfo()) as conn:
            conn.execute(
                "SELECT id FROM hermes_web_compaction WHERE id = %s FOR NO KEY UPDATE", [run.pk]
            )
            locked.set()
            release.wait(120)
            conn.rollback()

    holder = threading.Thread(target=hold_row_lock, daemon=True)
    holder.start()
    assert locked.wait(10)
    try:
        blocked = wait_until(
            _blocked_commit, 60, "the worker's commit to block on the run row", workers=[victim]
        )
        # Inside its open transaction the worker already wrote its messages.
        assert "hermes_web_message" in blocked["wrote"], blocked
        killed_at = time.monotonic()
        victim.kill_group()
        wait_until(
            lambda: not victim.group_alive(), 10, "the killed worker's process group to be gone"
        )
    finally:
        release.set()
        holder.join(10)
    # The backend of the killed worker aborts its transaction once it sees the closed socket.
    wait_until(lambda: _blocked_commit() is None, 30, "the killed worker's backend to go away")

    assert _snapshot() == before  # byte for byte: every session and message row
    assert table_counts()["hermes_web_message"] == counts_before["hermes_web_message"]
    assert Session.objects.filter(parent_id=session.pk).count() == 0
    run.refresh_from_db()
    assert run.status == Compaction.Status.RUNNING
    assert run.attempts == 1
    print(
        f"\n[crash:{mode}] killed pid group {victim.pid} inside the commit (it had written {blocked['wrote']}); "
        "sessions and messages byte-identical afterwards"
    )

    [rescuer] = spawn.workers(1, extra_env=env)
    wait_until(
        lambda: Compaction.objects.get(pk=run.pk).is_finished,
        TAKEOVER_BUDGET - (time.monotonic() - killed_at),
        lambda: f"the taken-over run to finish (now {Compaction.objects.get(pk=run.pk).status})",
        workers=[rescuer],
    )
    recovered_after = time.monotonic() - killed_at
    assert recovered_after < TAKEOVER_BUDGET
    run.refresh_from_db()
    assert run.status == Compaction.Status.COMMITTED, (run.status, run.reason, run.error)
    assert run.attempts == 2
    assert Compaction.objects.filter(session=session).count() == 1
    session.refresh_from_db()
    if mode == "rotation":
        children = list(Session.objects.filter(parent_id=session.pk))
        assert len(children) == 1
        assert children[0].pk == run.result_session_id
        assert Message.objects.filter(session=children[0], is_summary=True).count() == 1
        assert session.end_reason == Session.EndReason.COMPRESSION
        assert (
            Message.objects.filter(session=session).count() == counts_before["hermes_web_message"]
        )
    else:
        assert Session.objects.filter(parent_id=session.pk).count() == 0
        assert session.compression_count == 1
        assert Message.objects.filter(session=session, archived=True, archived_by=run).count() > 0
        assert Message.objects.filter(session=session, active=True, is_summary=True).count() == 1
        assert Message.objects.filter(session=session, active=True, archived=True).count() == 0
    assert orphan_report() == dict.fromkeys(orphan_report(), 0)
    assert not SessionLock.objects.filter(session=session).exclude(holder="").exists()
    print(
        f"[crash:{mode}] default leases: taken over and committed once on attempt {run.attempts}, "
        f"{recovered_after:.1f}s after the kill; no orphans"
    )
