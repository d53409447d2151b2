"""Sessions an import is still writing in batches (``extra["import_pending"]``, issue #39):
never shown on a page, in an API list or in search; deleted once abandoned (a killed worker)
past every import's time budget, at a worker's start and by a beat task."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from hermes_web.celery import _discard_abandoned_imports
from hermes_web.importers.store import PENDING, discard_abandoned
from hermes_web.models import Message, Session
from hermes_web.tasks import discard_abandoned_imports

pytestmark = pytest.mark.django_db


def _session(owner, title, *, pending):
    session = Session.objects.create(
        owner=owner,
        title=title,
        source="import:hermes",
        extra={PENDING: True} if pending else {"origin": "state.db"},
    )
    Message.objects.create(
        session=session, position=0, role="user", content=f"{title} mentions QUOKKAWORD"
    )
    return session


def test_a_session_still_pending_is_on_no_page_list_or_search(alice, alice_client):
    done = _session(alice, "finished import", pending=False)
    pending = _session(alice, "half written import", pending=True)

    page = alice_client.get(reverse("conversation_list")).content.decode()
    assert "finished import" in page
    assert "half written import" not in page

    listed = alice_client.get("/api/sessions").json()
    ids = {item["id"] for item in listed["items"]}
    assert done.public_id in ids
    assert pending.public_id not in ids

    assert alice_client.get(f"/api/sessions/{pending.public_id}").status_code == 404
    assert (
        alice_client.get(reverse("conversation_detail", args=[pending.public_id])).status_code
        == 404
    )

    hits = alice_client.get("/api/search", {"q": "QUOKKAWORD"}).json()["items"]
    found = {hit["conversation"] for hit in hits}
    assert found == {done.public_id}


def _age(session, seconds):
    Session.objects.filter(pk=session.pk).update(
        updated_at=timezone.now() - timedelta(seconds=seconds)
    )


def test_an_abandoned_pending_import_is_deleted_past_the_time_budget(alice):
    budget = settings.HERMES_IMPORT_CLI_SECONDS
    old = _session(alice, "killed mid import", pending=True)
    _age(old, budget + 3600)
    running = _session(alice, "still importing", pending=True)
    _age(running, budget - 60)  # a long CLI import still within its budget
    finished = _session(alice, "finished long ago", pending=False)
    _age(finished, budget + 3600)

    assert discard_abandoned() == 1
    assert set(Session.objects.values_list("title", flat=True)) == {
        "still importing",
        "finished long ago",
    }
    assert not Message.objects.filter(session_id=old.pk).exists()


def test_the_worker_start_and_the_beat_task_discard_abandoned_imports(alice):
    first = _session(alice, "left by a killed worker", pending=True)
    _age(first, settings.HERMES_IMPORT_CLI_SECONDS + 3600)
    _discard_abandoned_imports()
    assert not Session.objects.filter(pk=first.pk).exists()

    second = _session(alice, "left by another", pending=True)
    _age(second, settings.HERMES_IMPORT_CLI_SECONDS + 3600)
    assert discard_abandoned_imports.apply().get() == 1
    assert not Session.objects.filter(pk=second.pk).exists()
    entries = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "hermes_web.tasks.discard_abandoned_imports" in entries
