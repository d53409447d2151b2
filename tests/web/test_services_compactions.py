"""services.compactions: rotation and in-place commits, dry runs, auto trigger, the lock."""

import threading
import time

import pytest
from django.db import connection

from compaction import ConfigError
from hermes_web.models import Compaction, Message, Session, SessionLock
from hermes_web.services.compactions import (
    CompactionRefused,
    acquire_lock,
    commit_what_if,
    compaction_config_for,
    maybe_auto_compact,
    release_lock,
    request_compaction,
    run_compaction,
)
from hermes_web.services.sessions import append_message, openai_messages, resolve_tip
from tests.fake_openai import FakeOpenAIServer
from tests.web.compaction_helpers import SMALL_TAIL, conversation, use_summary_server

pytestmark = pytest.mark.django_db


def test_rotation_creates_a_linked_child_and_ends_the_parent(alice):
    parent = conversation(alice)
    before = list(parent.messages.values_list("position", "content"))
    run = request_compaction(
        session=parent, requested_by=alice, config_overrides=SMALL_TAIL, run_now=True
    )
    assert run.status == Compaction.Status.COMMITTED
    parent.refresh_from_db()
    child = run.result_session
    assert child.parent == parent
    assert child.root == parent
    assert parent.end_reason == Session.EndReason.COMPRESSION
    assert parent.ended_at is not None
    assert child.compression_count == parent.compression_count + 1
    assert child.owner == alice
    assert child.title == parent.title
    # The parent keeps every message untouched.
    assert list(parent.messages.values_list("position", "content")) == before
    rows = list(child.messages.order_by("position"))
    assert [r.position for r in rows] == list(range(len(rows)))
    summaries = [r for r in rows if r.is_summary]
    assert len(summaries) == 1
    assert summaries[0].position == run.report["summary_index"]
    assert child.previous_summary == run.report["summary_body"]
    assert run.tokens_after < run.tokens_before
    assert sum(r.token_count for r in rows) == run.tokens_after
    assert resolve_tip(parent) == child


def test_in_place_archives_old_rows_and_appends_the_compacted_list(alice):
    session = conversation(alice, compaction_mode="in_place")
    old_ids = set(session.messages.values_list("pk", flat=True))
    top = max(session.messages.values_list("position", flat=True))
    run = request_compaction(session=session, config_overrides=SMALL_TAIL, run_now=True)
    assert run.status == Compaction.Status.COMMITTED
    assert run.result_session == session
    archived = Message.objects.filter(pk__in=old_ids)
    assert archived.count() == len(old_ids)  # nothing deleted
    assert not archived.filter(active=True).exists()
    assert set(archived.values_list("archived_by", flat=True)) == {run.pk}
    active = list(Message.objects.filter(session=session).active())
    assert [m.position for m in active] == list(range(top + 1, top + 1 + len(active)))
    assert [m.to_openai()["role"] for m in active][0] == "system"
    assert sum(m.is_summary for m in active) == 1
    session.refresh_from_db()
    assert session.compression_count == 1
    assert session.ended_at is None
    assert session.previous_summary == run.report["summary_body"]


def test_in_place_twice_uses_the_previous_summary(alice):
    session = conversation(alice, n_messages=120, compaction_mode="in_place")
    request_compaction(session=session, config_overrides=SMALL_TAIL, run_now=True)
    from tests.web.compaction_helpers import fill

    fill(session, 60, seed=7)
    second = request_compaction(session=session, config_overrides=SMALL_TAIL, run_now=True)
    assert second.status == Compaction.Status.COMMITTED
    assert second.report["previous_summary_used"] is True
    assert Message.objects.filter(session=session, active=True, is_summary=True).count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["rotation", "in_place"])
def test_messages_appended_during_the_run_are_carried_over_in_order(alice, settings, mode):
    session = conversation(alice)
    with FakeOpenAIServer() as server:
        use_summary_server(settings, server)
        server.enqueue({"sleep": 1.5, "content": "## Goal\nKeep going."})
        run = request_compaction(session=session, mode=mode, config_overrides=SMALL_TAIL)
        worker = threading.Thread(target=lambda: (run_compaction(run.pk), connection.close()))
        worker.start()
        assert _wait(lambda: server.requests), "the summarizer was never called"
        append_message(session, role="user", content="late one")
        append_message(session, role="assistant", content="late two")
        worker.join(30)
    run.refresh_from_db()
    assert run.status == Compaction.Status.COMMITTED, run.error
    assert run.summarizer == "aux"
    live = run.result_session
    tail = [m["content"] for m in openai_messages(live)][-2:]
    assert tail == ["late one", "late two"]
    if mode == "rotation":
        # The parent keeps them too.
        assert list(
            session.messages.order_by("-position").values_list("content", flat=True)[:2]
        ) == ["late two", "late one"]
    else:
        summary = Message.objects.get(session=session, active=True, is_summary=True)
        late = Message.objects.filter(session=session, content__in=["late one", "late two"])
        assert all(m.active and m.position > summary.position for m in late)


def _wait(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_what_if_stores_the_report_and_commits_nothing(alice):
    session = conversation(alice)
    before = list(session.messages.values_list("pk", "active", "position"))
    run = request_compaction(
        session=session, trigger="what_if", config_overrides=SMALL_TAIL, run_now=True
    )
    assert run.status == Compaction.Status.DRY_RUN
    assert run.report["status"] == "compacted"
    assert run.tokens_after < run.tokens_before
    session.refresh_from_db()
    assert session.end_reason == ""
    assert session.compression_count == 0
    assert list(session.messages.values_list("pk", "active", "position")) == before
    assert Session.objects.count() == 1


def test_commit_what_if_queues_a_manual_run_with_the_same_settings(
    alice, django_capture_on_commit_callbacks
):
    session = conversation(alice)
    dry = request_compaction(
        session=session,
        trigger="what_if",
        mode="in_place",
        focus="the parser",
        config_overrides=SMALL_TAIL,
        summarizer="deterministic",
        run_now=True,
    )
    with django_capture_on_commit_callbacks() as callbacks:
        real = commit_what_if(dry, requested_by=alice)
    assert len(callbacks) == 1  # enqueued only once the transaction commits
    assert real.pk != dry.pk
    assert real.status == Compaction.Status.QUEUED
    assert (real.trigger, real.mode, real.focus, real.summarizer) == (
        "manual",
        "in_place",
        "the parser",
        "deterministic",
    )
    assert real.config == dry.config


def test_request_enqueues_only_after_commit(alice, django_capture_on_commit_callbacks):
    session = conversation(alice, n_messages=10)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = request_compaction(session=session)
    assert run.status == Compaction.Status.QUEUED
    assert len(callbacks) == 1
    assert run.config == compaction_config_for(session).to_dict()


def test_bad_override_names_the_field(alice):
    session = conversation(alice, n_messages=10)
    with pytest.raises(ConfigError, match="threshold_percent"):
        request_compaction(session=session, config_overrides={"threshold_percent": 7})
    assert not Compaction.objects.exists()


def test_a_rotated_session_cannot_be_compacted_again(alice):
    session = conversation(alice)
    request_compaction(session=session, config_overrides=SMALL_TAIL, run_now=True)
    session.refresh_from_db()
    with pytest.raises(CompactionRefused):
        request_compaction(session=session)
    # A dry run of the old segment is still allowed: it changes nothing.
    assert request_compaction(session=session, trigger="what_if", run_now=True).status == "dry_run"


def test_run_is_idempotent(alice):
    session = conversation(alice)
    run = request_compaction(session=session, config_overrides=SMALL_TAIL, run_now=True)
    again = run_compaction(run.pk)
    assert again.status == Compaction.Status.COMMITTED
    assert again.attempts == 1
    assert Session.objects.filter(parent=session).count() == 1


def test_nothing_to_compact_is_skipped_and_commits_nothing(alice):
    session = conversation(alice, n_messages=4)
    run = request_compaction(session=session, run_now=True)
    assert run.status == Compaction.Status.SKIPPED
    assert run.reason == "nothing_to_compact"
    session.refresh_from_db()
    assert session.end_reason == ""
    assert Session.objects.count() == 1


def test_engine_error_marks_the_run_failed(alice):
    session = conversation(alice, n_messages=10)
    run = request_compaction(session=session)
    Compaction.objects.filter(pk=run.pk).update(
        config={"threshold_percent": 5}
    )  # a stored config gone bad
    run = run_compaction(run.pk)
    assert run.status == Compaction.Status.FAILED
    assert "threshold_percent" in run.error
    assert not SessionLock.objects.filter(session=session).exclude(holder="").exists()


def test_auth_error_from_the_summarizer_aborts_with_nothing_committed(alice, settings):
    session = conversation(alice)
    with FakeOpenAIServer() as server:
        use_summary_server(settings, server)
        server.enqueue({"status": 401, "error": "bad key"})
        run = request_compaction(session=session, config_overrides=SMALL_TAIL, run_now=True)
    assert run.status == Compaction.Status.ABORTED
    assert run.reason == "summary_auth_error"
    session.refresh_from_db()
    assert session.end_reason == ""
    assert Session.objects.count() == 1


def test_transient_summarizer_error_falls_back_and_commits(alice, settings):
    session = conversation(alice)
    with FakeOpenAIServer() as server:
        use_summary_server(settings, server)
        server.enqueue({"status": 500, "error": "boom"})
        run = request_compaction(session=session, config_overrides=SMALL_TAIL, run_now=True)
    assert run.status == Compaction.Status.COMMITTED
    assert run.summarizer == "deterministic"
    assert run.report["fallbacks"][0]["kind"] == "server_error"


def test_deterministic_summarizer_can_be_forced(alice, settings):
    session = conversation(alice)
    with FakeOpenAIServer() as server:
        use_summary_server(settings, server)
        run = request_compaction(
            session=session, config_overrides=SMALL_TAIL, summarizer="deterministic", run_now=True
        )
        assert server.requests == []
    assert run.summarizer == "deterministic"


def test_the_demo_chat_model_is_not_used_as_a_summarizer(alice, settings):
    settings.HERMES_SUMMARY_MODEL = ""
    settings.HERMES_CHAT_MODEL = "demo"
    run = request_compaction(session=conversation(alice), config_overrides=SMALL_TAIL, run_now=True)
    assert run.status == Compaction.Status.COMMITTED
    assert run.summarizer == "deterministic"


# --- the lease -------------------------------------------------------------------------


def test_lock_is_exclusive_until_released_or_expired(alice, settings):
    session = conversation(alice, n_messages=4)
    assert acquire_lock(session.pk, "a")
    assert not acquire_lock(session.pk, "b")
    release_lock(session.pk, "a")
    assert acquire_lock(session.pk, "b")
    settings.HERMES_LOCK_LEASE_SECONDS = 0
    assert acquire_lock(session.pk, "c") is False  # b's lease (long) still holds
    SessionLock.objects.filter(session=session).update(expires_at="2000-01-01T00:00:00Z")
    assert acquire_lock(session.pk, "c")


def test_a_run_while_the_lease_is_held_waits_queued_and_runs_after_release(alice):
    session = conversation(alice)
    assert acquire_lock(session.pk, "someone-else")
    run = request_compaction(session=session, config_overrides=SMALL_TAIL, run_now=True)
    assert run.status == Compaction.Status.QUEUED  # not dropped as skipped/locked
    assert run.attempts == 0
    session.refresh_from_db()
    assert session.end_reason == ""
    assert Session.objects.count() == 1
    release_lock(session.pk, "someone-else")
    assert run_compaction(run.pk).status == Compaction.Status.COMMITTED


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["rotation", "in_place"])
def test_two_concurrent_deliveries_of_one_run_commit_exactly_once(alice, settings, mode):
    session = conversation(alice)
    with FakeOpenAIServer(default_reply={"sleep": 1.0, "content": "## Goal\nDone."}) as server:
        use_summary_server(settings, server)
        run = request_compaction(session=session, mode=mode, config_overrides=SMALL_TAIL)
        with pytest.raises(CompactionRefused, match="already queued"):
            request_compaction(session=session, mode=mode, config_overrides=SMALL_TAIL)
        barrier = threading.Barrier(2)

        def work():
            barrier.wait()
            try:
                run_compaction(run.pk)
            finally:
                connection.close()

        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    statuses = list(Compaction.objects.filter(session=session).values_list("status", "attempts"))
    assert statuses == [("committed", 1)]
    assert len(server.requests) == 1
    if mode == "rotation":
        assert Session.objects.filter(parent=session).count() == 1
    else:
        assert Message.objects.filter(session=session, active=True, is_summary=True).count() == 1
    assert SessionLock.objects.get(session=session).holder == ""


# --- automatic trigger -----------------------------------------------------------------


def _reply_with_usage(session, prompt_tokens):
    append_message(session, role="user", content="next?")
    append_message(session, role="assistant", content="ok", provider_prompt_tokens=prompt_tokens)


def test_auto_compact_below_threshold_records_nothing(alice, django_capture_on_commit_callbacks):
    session = conversation(alice, context_length=200_000)
    _reply_with_usage(session, 1_000)
    with django_capture_on_commit_callbacks() as callbacks:
        assert maybe_auto_compact(session) is None
    assert callbacks == []
    assert not Compaction.objects.exists()


def test_auto_compact_over_threshold_queues_one_run(alice, django_capture_on_commit_callbacks):
    session = conversation(alice, context_length=200_000)
    _reply_with_usage(session, 150_000)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = maybe_auto_compact(session)
        assert maybe_auto_compact(session) is None  # one is already queued
    assert run.status == Compaction.Status.QUEUED
    assert run.trigger == "auto"
    assert len(callbacks) == 1


def test_auto_compact_without_usage_does_nothing(alice):
    session = conversation(alice)
    assert maybe_auto_compact(session) is None


def test_anti_thrash_records_one_ineffective_row_per_crossing(alice):
    session = conversation(alice, context_length=200_000, compaction_mode="in_place")
    for _ in range(2):  # two past compactions that saved almost nothing
        Compaction.objects.create(
            session=session,
            status="committed",
            tokens_before=100_000,
            tokens_after=99_000,
            finished_at=session.created_at,
        )
    _reply_with_usage(session, 150_000)
    first = maybe_auto_compact(session)
    assert first.status == Compaction.Status.SKIPPED
    assert first.reason == "ineffective"
    _reply_with_usage(session, 151_000)
    assert maybe_auto_compact(session) is None
    assert Compaction.objects.filter(reason="ineffective").count() == 1


def test_anti_thrash_history_spans_the_rotation_chain(alice):
    parent = conversation(alice, context_length=200_000)
    child = Session.objects.create(owner=alice, parent=parent, root=parent, context_length=200_000)
    for session in (parent, child):
        Compaction.objects.create(
            session=session,
            status="committed",
            tokens_before=100_000,
            tokens_after=98_000,
            finished_at=session.created_at,
        )
    _reply_with_usage(child, 150_000)
    assert maybe_auto_compact(child).reason == "ineffective"
