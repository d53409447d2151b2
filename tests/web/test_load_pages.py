"""Issue #28, pages under load: the work a repeated view of an unchanged conversation skips,
and that what it serves is never older than the data."""

import re

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.html import escape

from hermes_web import caching
from hermes_web.services.compactions import request_compaction
from hermes_web.services.sessions import append_message, create_session
from hermes_web.views import compactions
from hermes_web.views.conversations import CHUNK
from tests.web.inspector_seed import PAYLOAD, compact_now, seed_conversation

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_cache")]


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


# ---------------------------------------------------------------- inspector: texts on request


@pytest.fixture
def committed(alice):
    session = seed_conversation(alice, n=120, title="Parser work", payload=True)
    return compact_now(session, alice, mode="rotation")


def section(html: str, panel_id: str) -> str:
    start = html.index(f'id="{panel_id}"')
    return html[start : html.index("</section>", start)]


def test_the_summarizer_input_loads_when_its_box_is_opened_or_on_its_own_page(
    committed, alice_client, bob_client
):
    text = committed.report["summarizer_input"]
    assert PAYLOAD in text
    html = alice_client.get(reverse("compaction_detail", args=[committed.public_id])).content
    html = html.decode()
    url = reverse("compaction_summarizer_text", args=[committed.public_id, "input"])
    box = section(html, "summarizer-input")
    # The box says how long the text is and fetches it when opened; its link works without JS.
    assert f"Input exactly as sent ({len(text):,} characters)" in box
    assert f'hx-get="{url}" hx-trigger="toggle once" hx-target="find .lazy-body"' in box
    assert f'<a href="{url}">Show the input exactly as sent</a>' in box
    assert escape(text) not in html
    assert "<details open" not in box

    partial = alice_client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert partial == f'<pre tabindex="0">{escape(text)}</pre>\n'
    assert PAYLOAD not in partial  # escaped, as on the inspector before

    page = alice_client.get(url).content.decode()
    assert "<html" in page
    assert "<h1>Summarizer input exactly as sent</h1>" in page
    assert f'<pre tabindex="0">{escape(text)}</pre>' in page
    assert f'href="{reverse("compaction_detail", args=[committed.public_id])}"' in page

    # A deterministic run sent no prompt: the inspector offers none, the page is empty.
    assert "Full prompt sent to the model" not in box
    assert "there is no prompt" in box
    prompt = reverse("compaction_summarizer_text", args=[committed.public_id, "prompt"])
    assert "0 characters" in alice_client.get(prompt).content.decode()
    other = reverse("compaction_summarizer_text", args=[committed.public_id, "report"])
    assert alice_client.get(other).status_code == 404
    assert bob_client.get(url).status_code == 404
    assert bob_client.get(url, HTTP_HX_REQUEST="true").status_code == 404


def final_rows_of(html: str) -> list[str]:
    return re.findall(r'<td><a href="([^"]+)">(\d+)</a></td>', html)


def test_a_long_final_list_loads_when_opened_and_a_short_one_is_listed_inline(
    committed, alice_client, bob_client, monkeypatch
):
    expected = committed.report["counts"]["messages_after"]
    page_url = reverse("compaction_detail", args=[committed.public_id])
    inline = section(alice_client.get(page_url).content.decode(), "final-list")
    assert expected <= compactions.FINAL_INLINE_MAX
    assert "<details open>" in inline
    rows = final_rows_of(inline)
    assert len(rows) == expected

    monkeypatch.setattr(compactions, "FINAL_INLINE_MAX", expected - 1)
    cache.clear()  # the panels are cached as rendered
    lazy = section(alice_client.get(page_url).content.decode(), "final-list")
    url = reverse("compaction_final_list", args=[committed.public_id])
    assert f"{expected:,} messages, <strong>" in lazy
    assert f'hx-get="{url}" hx-trigger="toggle once"' in lazy
    assert f'<a href="{url}">Show the {expected:,} messages</a>' in lazy
    assert final_rows_of(lazy) == []
    assert "<details open>" not in lazy

    partial = alice_client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial
    assert final_rows_of(partial) == rows  # the same rows, the same links as inline
    page = alice_client.get(url).content.decode()
    assert "<html" in page
    assert "<h1>Final assembled list</h1>" in page
    assert final_rows_of(page) == rows
    assert bob_client.get(url).status_code == 404


def test_a_dry_runs_final_list_page_lists_the_tokens_it_would_send(alice, alice_client):
    session = seed_conversation(alice, n=60)
    dry = request_compaction(
        session=session, trigger="what_if", summarizer="deterministic", run_now=True
    )
    assert dry.status == "dry_run", dry.error
    tokens = dry.report["output_message_tokens"]
    partial = alice_client.get(
        reverse("compaction_final_list", args=[dry.public_id]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert partial.count("<li>") == len(tokens)
    assert f"<li>{tokens[-1]:,} tokens</li>" in partial
    assert "<table" not in partial


# ---------------------------------------------------------------- conversation windows


def shown(html: str) -> list[int]:
    return [int(p) for p in re.findall(r'<article[^>]* id="m(\d+)"', html)]


def link(html: str, words: str) -> str | None:
    found = re.search(r'<a[^>]* href="\?start=(\d+)[^"]*"[^>]*>[^<]*' + words, html)
    return found.group(1) if found else None


@pytest.mark.parametrize("extra", [0, 1, CHUNK - 1])
def test_conversation_windows_at_their_boundaries_reach_the_newest_message(
    alice, alice_client, extra
):
    n = CHUNK + extra
    session = create_session(owner=alice, title="windows")
    for i in range(n):
        append_message(session, role="user" if i % 2 == 0 else "assistant", content=f"m{i}")
    url = reverse("conversation_detail", args=[session.public_id])
    first = alice_client.get(url).content.decode()
    assert shown(first) == list(range(CHUNK))
    if not extra:  # exactly one window: nothing to load, nothing newer
        assert "Load more messages" not in first
        assert link(first, "↓ Newest messages") is None
        return
    assert link(first, "Load more messages") == str(CHUNK)
    newest = link(first, "↓ Newest messages")
    assert newest is not None
    # The newest window ends with the last message, and pages back to the first.
    last = alice_client.get(url, {"start": newest}).content.decode()
    assert shown(last)[-1] == n - 1
    assert len(shown(last)) == CHUNK
    assert "Load more messages" not in last
    back = link(last, "↑ Earlier messages")
    assert back == "0"
    # In place: the next window alone, ending with the last message and no further link.
    chunk = alice_client.get(url, {"start": CHUNK, "chunk": 1}, HTTP_HX_REQUEST="true")
    assert shown(chunk.content.decode()) == list(range(CHUNK, n))
    assert b"<html" not in chunk.content
    assert b"Load more messages" not in chunk.content


def test_a_conversations_compactions_and_children_are_read_only_when_it_has_some(
    alice, alice_client
):
    session = seed_conversation(alice, n=60, title="parent")
    url = reverse("conversation_detail", args=[session.public_id])
    alice_client.get(url)
    with CaptureQueriesContext(connection) as queries:
        page = alice_client.get(url).content.decode()
    assert len(queries) == 1
    assert 'class="panel" open' not in page  # no compactions panel
    assert "it continues in" not in page

    run = compact_now(session, alice, mode="rotation")
    page = alice_client.get(url).content.decode()
    child = run.result_session
    assert f"/compactions/{run.public_id}/" in page  # listed in the compactions panel
    assert "1 committed" in page
    assert f'it continues in <a href="/conversations/{child.public_id}/">' in page
    # A chunk loaded in place asks for neither.
    with CaptureQueriesContext(connection) as queries:
        chunk = alice_client.get(url, {"start": 0, "chunk": 1}, HTTP_HX_REQUEST="true")
    assert chunk.status_code == 200
    assert not [q for q in queries.captured_queries if 'FROM "hermes_web_compaction"' in q["sql"]]


def test_an_api_page_bigger_than_the_cap_is_answered_uncached(alice, alice_client, monkeypatch):
    session = create_session(owner=alice)
    url = f"/api/sessions/{session.public_id}/messages"
    for _ in range(3):
        alice_client.post(
            url, {"role": "user", "content": "x" * 400}, content_type="application/json"
        )
    small = alice_client.get(url, {"limit": 1}).content
    monkeypatch.setattr(caching, "MESSAGE_PAGE_MAX_BYTES", len(small))
    first = alice_client.get(url).content  # three rows: over the cap
    assert len(first) > len(small)
    with CaptureQueriesContext(connection) as queries:
        assert alice_client.get(url).content == first
        assert alice_client.get(url, {"limit": 1}).content == small  # cached before: still
    reads = message_queries(queries)
    assert len(reads) == 1, reads  # the big page read again, the small one from the cache
