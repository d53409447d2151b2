"""Issue #28, pages under load: the work a repeated view of an unchanged conversation skips,
and that what it serves is never older than the data."""

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from hermes_web import caching
from hermes_web.services.sessions import create_session
from tests.web.inspector_seed import compact_now, seed_conversation

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch):
    # The "no worker" banner's few seconds could run out between two views on a loaded machine.
    monkeypatch.setattr(caching, "WORKER_STATUS_SECONDS", 3600)
    cache.clear()
    yield
    cache.clear()


def message_queries(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if "hermes_web_message" in q["sql"]]


def test_an_api_page_of_messages_is_served_without_reading_them_until_the_session_changes(
    alice, alice_client
):
    session = create_session(owner=alice)
    url = f"/api/sessions/{session.public_id}/messages"
    posted = [
        alice_client.post(
            url, {"role": "user", "content": f"m{i}"}, content_type="application/json"
        )
        for i in range(3)
    ]
    first = alice_client.get(url, {"limit": 2, "offset": 1})
    assert first.status_code == 200
    assert first["Content-Type"].startswith("application/json")
    with CaptureQueriesContext(connection) as queries:
        again = alice_client.get(url, {"limit": 2, "offset": 1})
    assert message_queries(queries) == []
    assert again.content == first.content
    page = again.json()
    assert page["count"] == 3
    # Each item as the append answered it: the same fields, the same time format.
    assert page["items"] == [posted[1].json(), posted[2].json()]
    # Another page of the same session is its own entry.
    assert [m["content"] for m in alice_client.get(url, {"limit": 1}).json()["items"]] == ["m0"]

    alice_client.post(url, {"role": "assistant", "content": "m3"}, content_type="application/json")
    with CaptureQueriesContext(connection) as queries:
        moved = alice_client.get(url, {"limit": 2, "offset": 1}).json()
    assert message_queries(queries)  # the append touched the session: read anew
    assert moved["count"] == 4
    assert [m["content"] for m in moved["items"]] == ["m1", "m2"]
    assert [m["content"] for m in alice_client.get(url, {"offset": 3}).json()["items"]] == ["m3"]


def test_an_in_place_compaction_changes_the_cached_api_pages(alice, alice_client):
    session = seed_conversation(alice, n=40)
    url = f"/api/sessions/{session.public_id}/messages"
    before = alice_client.get(url, {"limit": 500}).json()
    with_archived = alice_client.get(url, {"limit": 500, "include_archived": True}).json()
    assert before["count"] == with_archived["count"] == 40

    run = compact_now(session, alice, mode="in_place")
    assert run.status == "committed", run.error
    after = alice_client.get(url, {"limit": 500}).json()
    everything = alice_client.get(url, {"limit": 500, "include_archived": True}).json()
    active = session.messages.filter(active=True).order_by("position")
    assert after["count"] == len(after["items"]) == active.count() < 40
    assert [m["position"] for m in after["items"]] == [m.position for m in active]
    assert any(m["is_summary"] for m in after["items"])
    assert everything["count"] == session.messages.count() > 40
    assert sum(m["archived"] for m in everything["items"]) == run.archived_messages.count()


def test_the_conversation_list_counts_its_sessions_and_hidden_empties_in_one_query(
    alice, alice_client
):
    seed_conversation(alice, n=5, title="kept")
    create_session(owner=alice, title="imported, empty", source="import:openai")
    response = alice_client.get("/conversations/")  # fills the rows' cache
    assert "1 imported session with no messages not listed" in response.content.decode()
    with CaptureQueriesContext(connection) as queries:
        again = alice_client.get("/conversations/").content.decode()
    session_queries = [
        q["sql"] for q in queries.captured_queries if "hermes_web_session" in q["sql"]
    ]
    assert len(session_queries) == 1, session_queries
    assert "kept" in again
    assert "imported, empty" not in again
    assert "1 imported session with no messages not listed" in again
    listed = alice_client.get("/conversations/", {"empty": "1"}).content.decode()
    assert "imported, empty" in listed
    assert "not listed" not in listed
