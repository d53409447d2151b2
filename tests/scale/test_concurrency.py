"""Proof 1: eight compaction requests for one session at once: one accepted, seven refused at
request time (the database's one-live-run constraint), and the accepted one commits once."""

import threading
import time

import pytest
from django.db import connection

from hermes_web.models import Compaction, Session
from hermes_web.services.compactions import CompactionBusy, request_compaction
from tests.scale.harness import build_session, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_eight_simultaneous_requests_one_accepted_seven_refused_commit_once(spawn, owner, slow_llm):
    session = build_session(owner, 600, seed=1, compaction_mode="rotation")
    workers = spawn.workers(2, extra_env=slow_llm.worker_env)

    barrier = threading.Barrier(8)
    ids: list[int] = []
    refused: list[CompactionBusy] = []
    errors: list[BaseException] = []

    def request() -> None:
        try:
            barrier.wait(timeout=10)
            run = request_compaction(session=Session.objects.get(pk=session.pk), trigger="manual")
            ids.append(run.pk)
        except CompactionBusy as busy:
            refused.append(busy)
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
    assert len(ids) == 1, ids
    assert len(refused) == 7
    assert {busy.running.pk for busy in refused if busy.running} <= set(ids)

    wait_until(
        lambda: Compaction.objects.get(pk=ids[0]).is_finished,
        120,
        lambda: list(Compaction.objects.filter(pk__in=ids).values_list("status", "reason")),
        workers=workers,
    )
    elapsed = time.monotonic() - started

    assert Compaction.objects.filter(session=session).count() == 1
    winner = Compaction.objects.get(pk=ids[0])
    assert winner.status == Compaction.Status.COMMITTED, (winner.status, winner.error)
    assert winner.attempts == 1
    # The winner summarized through litellm against the fake server, and nobody else called it.
    assert winner.summarizer != "deterministic", winner.report.get("fallbacks")
    assert len(slow_llm.requests) == 1

    children = list(Session.objects.filter(parent_id=session.pk))
    assert len(children) == 1
    assert children[0].pk == winner.result_session_id
    assert children[0].messages.count() > 0
    assert Session.objects.get(pk=session.pk).end_reason == Session.EndReason.COMPRESSION

    print(
        f"\n[concurrency] 8 simultaneous requests: 1 accepted, {len(refused)} refused at request "
        f"time; committed once in {elapsed:.1f}s ({winner.summarizer} {winner.summarizer_model}); "
        f"LLM calls {len(slow_llm.requests)}"
    )
