"""Proof 1: eight compactions of one session at once, over four worker processes: one commits."""

import threading
import time

import pytest
from django.db import connection

from hermes_web.models import Compaction, Session
from hermes_web.services.compactions import request_compaction
from tests.scale.harness import build_session, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_eight_simultaneous_requests_commit_once_and_seven_skip_locked(spawn, owner, slow_llm):
    session = build_session(owner, 600, seed=1, compaction_mode="rotation")
    workers = spawn.workers(
        4, extra_env={**slow_llm.worker_env, "HERMES_LOCK_LEASE_SECONDS": "120"}
    )

    barrier = threading.Barrier(8)
    ids: list[int] = []
    errors: list[BaseException] = []

    def request() -> None:
        try:
            barrier.wait(timeout=10)
            run = request_compaction(session=Session.objects.get(pk=session.pk), trigger="manual")
            ids.append(run.pk)
        except BaseException as error:  # reported below; a thread must not swallow it
            errors.append(error)
        finally:
            connection.close()

    started = time.monotonic()
    threads = [threading.Thread(target=request) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    assert len(ids) == 8

    def all_finished():
        return Compaction.objects.filter(pk__in=ids, finished_at__isnull=False).count() == 8

    wait_until(
        all_finished,
        120,
        lambda: list(Compaction.objects.filter(pk__in=ids).values_list("status", "reason")),
        workers=workers,
    )
    elapsed = time.monotonic() - started

    runs = list(Compaction.objects.filter(pk__in=ids).order_by("finished_at"))
    committed = [r for r in runs if r.status == Compaction.Status.COMMITTED]
    skipped = [r for r in runs if r.status == Compaction.Status.SKIPPED]
    assert len(committed) == 1, [(r.status, r.reason, r.error) for r in runs]
    assert len(skipped) == 7
    assert {r.reason for r in skipped} == {"locked"}
    winner = committed[0]
    # The seven were turned away while the winner held the lease, not after it finished.
    assert all(r.finished_at < winner.finished_at for r in skipped)
    # The winner summarized through litellm against the fake server, and nobody else called it.
    assert winner.summarizer != "deterministic", winner.report.get("fallbacks")
    assert len(slow_llm.requests) == 1

    children = list(Session.objects.filter(parent_id=session.pk))
    assert len(children) == 1
    assert children[0].pk == winner.result_session_id
    assert children[0].messages.count() > 0
    assert Session.objects.get(pk=session.pk).end_reason == "compression"

    per_worker = {w.name: w.tasks_finished() for w in workers}
    assert sum(1 for n in per_worker.values() if n) >= 2, (
        per_worker
    )  # the requests really spread out
    print(
        f"\n[concurrency] 8 requests over {len(workers)} workers in {elapsed:.1f}s: "
        f"1 committed ({winner.summarizer} {winner.summarizer_model}, "
        f"{(winner.finished_at - winner.started_at).total_seconds():.1f}s), "
        f"7 skipped/locked; tasks per worker {per_worker}; LLM calls {len(slow_llm.requests)}"
    )
