"""Proof 6: messages posted while a compaction runs are all in the live session afterwards, in order.

A poster thread does what a chat post does (resolve the live tip of the chain, append to it)
every 10 ms from the moment the summary request is in flight until well after the commit,
so posts land before, across and after the commit transaction.
"""

import threading
import time

import pytest
from django.db import connection

from hermes_web.models import Compaction, Message, Session
from hermes_web.services.compactions import request_compaction
from hermes_web.services.sessions import append_message, openai_messages, resolve_tip
from tests.scale.harness import build_session, orphan_report, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("mode", ["rotation", "in_place"])
def test_messages_posted_during_a_compaction_all_survive_in_order(spawn, owner, slow_llm, mode):
    session = build_session(owner, 400, seed=60, compaction_mode=mode)
    [worker] = spawn.workers(
        1, extra_env={**slow_llm.worker_env, "HERMES_LOCK_LEASE_SECONDS": "120"}
    )

    run = request_compaction(session=session, trigger="manual", mode=mode)
    wait_until(lambda: slow_llm.requests, 60, "the summary request", workers=[worker])

    posted: list[str] = []
    posted_at: list[float] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def post() -> None:
        try:
            i = 0
            while not stop.is_set():
                tip = resolve_tip(Session.objects.get(pk=session.pk))
                text = f"posted during compaction #{i}"
                append_message(tip, role="user" if i % 2 == 0 else "assistant", content=text)
                posted.append(text)
                posted_at.append(time.time())
                i += 1
                time.sleep(0.01)
        except BaseException as error:  # reported below
            errors.append(error)
        finally:
            connection.close()

    poster = threading.Thread(target=post)
    poster.start()
    try:
        wait_until(
            lambda: Compaction.objects.get(pk=run.pk).is_finished,
            90,
            "the compaction to finish",
            workers=[worker],
        )
        time.sleep(1.0)  # keep posting after the commit too
    finally:
        stop.set()
        poster.join(30)
    assert not errors, errors
    run.refresh_from_db()
    assert run.status == Compaction.Status.COMMITTED, (run.status, run.reason, run.error)

    live = resolve_tip(Session.objects.get(pk=session.pk))
    if mode == "rotation":
        assert live.pk == run.result_session_id
    else:
        assert live.pk == session.pk
    contents = [m["content"] for m in openai_messages(live)]
    late = [
        c for c in contents if isinstance(c, str) and c.startswith("posted during compaction #")
    ]
    assert late == posted  # every post, once, in the order it was made
    assert (
        contents[-len(posted) :] == posted
    )  # and they are the newest messages of the live session
    positions = list(
        Message.objects.filter(session=live, active=True).values_list("position", flat=True)
    )
    assert positions == sorted(set(positions))
    assert orphan_report() == dict.fromkeys(orphan_report(), 0)
    before_commit = sum(1 for t in posted_at if t < run.finished_at.timestamp())
    print(
        f"\n[chat under compaction:{mode}] {len(posted)} messages posted while the run went on "
        f"({before_commit} before its commit, {len(posted) - before_commit} after); "
        f"all {len(posted)} present once, in order, at the end of the live session"
    )
