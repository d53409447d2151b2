"""Conversation list and conversation view: counts, search, chunks, links, archived rows, isolation."""

import re

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from hermes_web import caching
from hermes_web.models import Message
from hermes_web.presenters.messages import anchor_for
from hermes_web.services.sessions import append_message, create_session
from hermes_web.views.conversations import CHUNK
from tests.web.inspector_seed import compact_now, seed_conversation

pytestmark = pytest.mark.django_db

PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="


def detail_url(session, **query):
    url = reverse("conversation_detail", args=[session.public_id])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def test_empty_state_points_to_chat_and_import(alice_client):
    response = alice_client.get(reverse("conversation_list"))
    assert response.status_code == 200
    assert b"No conversations yet" in response.content
    assert reverse("chat").encode() in response.content
    assert reverse("import_page").encode() in response.content


def test_list_shows_counts_tokens_and_compactions(alice, alice_client):
    session = seed_conversation(alice, n=60, title="Parser work")
    compact_now(session, alice, mode="in_place")
    response = alice_client.get(reverse("conversation_list"))
    html = response.content.decode()
    row = html[html.index("Parser work") :].split("</tr>")[0]
    messages, tokens, compactions = re.findall(r'<td class="num">([^<]*)', row)
    active = Message.objects.filter(session=session, active=True)
    assert messages == f"{active.count():,}"
    assert tokens == f"{sum(active.values_list('token_count', flat=True)):,}"
    assert compactions.strip() == "1"


def test_search_and_source_filter(alice, alice_client):
    create_session(owner=alice, title="Timezone bug", source="chat")
    imported = create_session(owner=alice, title="Storage refactor", source="import:codex")
    # an imported session with no messages is not listed (test_import_hygiene)
    Message.objects.create(session=imported, position=0, role="user", content="refactor")

    def titles(response):
        tips = r'<tr class="chain-tip">\s*<td><a href="[^"]*">([^<]*)</a>'
        return re.findall(tips, response.content.decode())

    assert titles(alice_client.get(reverse("conversation_list"), {"q": "timezone"})) == [
        "Timezone bug"
    ]
    assert titles(alice_client.get(reverse("conversation_list"), {"source": "import:codex"})) == [
        "Storage refactor"
    ]
    nothing = alice_client.get(reverse("conversation_list"), {"q": "nomatch"})
    assert b"No conversation matches" in nothing.content


def test_list_htmx_returns_only_the_rows(alice, alice_client):
    create_session(owner=alice, title="One")
    response = alice_client.get(reverse("conversation_list"), {"q": "One"}, HTTP_HX_REQUEST="true")
    assert b'id="conversation-rows"' in response.content
    assert b"<html" not in response.content


def test_list_shows_only_own_sessions(alice, bob, bob_client):
    create_session(owner=alice, title="Alice secret")
    assert b"Alice secret" not in bob_client.get(reverse("conversation_list")).content


def test_list_rejects_post(alice_client):
    assert alice_client.post(reverse("conversation_list")).status_code == 405


def test_detail_loads_in_chunks_with_a_real_load_more_link(alice, alice_client):
    rest = CHUNK // 2
    session = seed_conversation(alice, n=CHUNK + rest)
    response = alice_client.get(detail_url(session))
    assert response.status_code == 200
    html = response.content.decode()
    assert len(re.findall(r'<article[^>]* id="m\d+"', html)) == CHUNK
    next_start = CHUNK
    assert f'href="?start={next_start}"' in html
    assert f'hx-get="?start={next_start}&amp;chunk=1"' in html
    chunk = alice_client.get(detail_url(session, start=next_start, chunk=1), HTTP_HX_REQUEST="true")
    assert b"<html" not in chunk.content
    assert len(re.findall(r'<article[^>]* id="m\d+"', chunk.content.decode())) == rest
    assert b"Load more messages" not in chunk.content
    assert f'id="m{CHUNK + rest - 1}"'.encode() in chunk.content
    # Without htmx the same link is a full page starting at that message.
    page = alice_client.get(detail_url(session, start=next_start))
    assert b"<html" in page.content
    assert f'id="m{CHUNK}"'.encode() in page.content


def test_tool_calls_link_to_their_results_and_back(alice, alice_client):
    session = seed_conversation(alice, n=40)
    call_row = Message.objects.filter(
        session=session, role="assistant", tool_calls__isnull=False
    ).first()
    call_id = call_row.tool_calls[0]["id"]
    anchor = anchor_for(call_id)
    html = alice_client.get(detail_url(session)).content.decode()
    assert f'id="call-{anchor}"' in html
    assert f'href="#result-{anchor}"' in html
    assert f'id="result-{anchor}"' in html
    assert f'href="#call-{anchor}"' in html


def test_call_whose_result_is_on_the_next_chunk_links_there(alice, alice_client):
    session = create_session(owner=alice, title="edge")
    for i in range(CHUNK - 1):
        append_message(session, role="user" if i % 2 == 0 else "assistant", content=f"m{i}")
    call = {
        "id": "call_edge",
        "type": "function",
        "function": {"name": "terminal", "arguments": "{}"},
    }
    # The window's last row calls; the result is the next window's first.
    append_message(session, role="assistant", content=None, tool_calls=[call])
    append_message(session, role="tool", content="done", tool_call_id="call_edge")
    html = alice_client.get(detail_url(session)).content.decode()
    assert f'href="?start={CHUNK}#result-{anchor_for("call_edge")}"' in html


def test_reasoning_is_collapsed_and_images_are_thumbnails(alice, alice_client):
    session = create_session(owner=alice)
    append_message(
        session,
        role="user",
        content=[
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": PNG}},
        ],
    )
    append_message(session, role="assistant", content="ok", reasoning="secret chain of thought")
    html = alice_client.get(detail_url(session)).content.decode()
    assert f'<img src="{PNG}"' in html
    assert re.search(
        r'<details class="reasoning"><summary>reasoning</summary><pre[^>]*>secret chain of thought',
        html,
    )


def test_long_messages_are_cut_with_a_link_to_the_whole(alice, alice_client):
    session = create_session(owner=alice)
    append_message(session, role="tool", content="A" * 10_000 + "THE-END", tool_call_id="x")
    html = alice_client.get(detail_url(session)).content.decode()
    assert "THE-END" not in html
    full_url = reverse("message_detail", args=[session.public_id, 0])
    assert full_url in html
    assert "THE-END" in alice_client.get(full_url).content.decode()


def test_archived_rows_are_hidden_then_shown_collapsed(alice, alice_client):
    session = seed_conversation(alice, n=60)
    run = compact_now(session, alice, mode="in_place")
    archived = Message.objects.filter(session=session, archived=True).count()
    assert archived > 0
    default = alice_client.get(detail_url(session))
    assert b'class="msg archived' not in default.content
    assert f"{archived} messages were archived".encode() in default.content
    shown = alice_client.get(detail_url(session, archived=1)).content.decode()
    assert '<details class="msg archived' in shown
    assert reverse("compaction_detail", args=[run.public_id]) in shown


def test_header_numbers_follow_appends_and_commits_after_a_view(alice, alice_client):
    session = seed_conversation(alice, n=60)

    def header() -> tuple[int, int, str]:
        html = alice_client.get(detail_url(session)).content.decode()
        n, tokens = re.search(r"([\d,]+) active messages · ([\d,]+) tokens", html).groups()
        archived = re.search(r"(\d+) messages were archived", html)
        number = lambda text: int(text.replace(",", ""))  # noqa: E731 - thousands separators
        return number(n), number(tokens), archived.group(1) if archived else ""

    def expected() -> tuple[int, int, str]:
        active = Message.objects.filter(session=session, active=True)
        archived = Message.objects.filter(session=session, archived=True).count()
        tokens = sum(active.values_list("token_count", flat=True))
        return active.count(), tokens, str(archived) if archived else ""

    assert header() == expected() == (60, expected()[1], "")
    append_message(session, role="user", content="one more question")
    assert header() == expected()
    assert header()[0] == 61
    compact_now(session, alice, mode="in_place")
    session.refresh_from_db()
    assert header() == expected()
    assert header()[2] != ""


def test_a_repeated_view_of_an_unchanged_conversation_reads_no_messages(
    alice, alice_client, monkeypatch
):
    # The "no worker" banner is cached for seconds, not per session: a value an earlier test left
    # could expire between the two views on a loaded machine and add its own queries. Start from
    # an empty cache and hold that one lifetime for the test, so only per-session caching counts.
    monkeypatch.setattr(caching, "WORKER_STATUS_SECONDS", 3600)
    cache.clear()
    session = seed_conversation(alice, n=60)
    first = alice_client.get(detail_url(session))
    with CaptureQueriesContext(connection) as queries:
        again = alice_client.get(detail_url(session))
    assert first.status_code == again.status_code == 200
    tables = [re.findall(r'FROM "(\w+)"', q["sql"]) for q in queries]
    assert not any("hermes_web_message" in t for t in tables), tables
    # The session, asked with it whether it has compactions or children; it has neither
    # (nor a parent, so no producing rotation): one query, was 3.
    assert len(queries) == 1, tables


def test_rotated_parent_points_to_its_continuation(alice, alice_client):
    session = seed_conversation(alice, n=60)
    run = compact_now(session, alice, mode="rotation")
    parent_html = alice_client.get(detail_url(session)).content.decode()
    assert "ended by compaction" in parent_html
    assert reverse("conversation_detail", args=[run.result_session.public_id]) in parent_html
    child_html = alice_client.get(detail_url(run.result_session)).content.decode()
    assert reverse("compaction_detail", args=[run.public_id]) in child_html
    assert "compaction summary" in child_html


def test_other_users_conversation_is_404(alice, bob_client):
    session = create_session(owner=alice)
    append_message(session, role="user", content="hi")
    assert bob_client.get(detail_url(session)).status_code == 404
    assert bob_client.get(reverse("message_detail", args=[session.public_id, 0])).status_code == 404


def test_unknown_message_position_is_404(alice, alice_client):
    session = create_session(owner=alice)
    assert (
        alice_client.get(reverse("message_detail", args=[session.public_id, 5])).status_code == 404
    )


def test_detail_rejects_post(alice, alice_client):
    session = create_session(owner=alice)
    assert alice_client.post(detail_url(session)).status_code == 405


def test_anonymous_is_sent_to_login(client, alice):
    session = create_session(owner=alice)
    response = client.get(detail_url(session))
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_bad_start_parameter_is_ignored(alice, alice_client):
    session = seed_conversation(alice, n=10)
    assert alice_client.get(detail_url(session, start="abc")).status_code == 200


def test_pages_still_render_when_the_redis_cache_is_down(alice_client, alice, settings, caplog):
    # The settings fixture fires setting_changed, which makes Django drop its cache handlers.
    settings.CACHES = {
        "default": {
            "BACKEND": "hermes_web.caching.ForgivingRedisCache",
            "LOCATION": "redis://127.0.0.1:1/1",
        }
    }
    session = seed_conversation(alice, n=20)
    assert alice_client.get(detail_url(session)).status_code == 200
    assert alice_client.get("/conversations/").status_code == 200
    assert "cache read failed" in caplog.text
