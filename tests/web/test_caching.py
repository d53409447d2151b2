"""hermes_web.caching: what a cached page skips, and what makes it stale.

Asserted on the rendered HTML and on the SQL each request runs (never by calling the lazy
values a view hands its template): a cache hit runs none of the queries that build the
cached fragment, and ``Session.touch()`` (every writer of a session's rows calls it) makes
the next request build it again.
"""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from hermes_web import caching
from hermes_web.caching import LazyPanels
from hermes_web.services.sessions import append_message
from tests.web.inspector_seed import compact_now, seed_conversation

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_cache")]


def _get(client, url):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return response.content.decode(), [q["sql"] for q in queries.captured_queries]


def _message_reads(sql: list[str]) -> list[str]:
    # The chunk's rows: a SELECT of the message table with its archived_by join.
    # (PostgreSQL reads a chunk through a server-side cursor: "DECLARE ... FOR SELECT ...".)
    return [q for q in sql if "SELECT" in q and '"hermes_web_message"."content"' in q]


def test_a_cached_message_chunk_skips_its_queries_until_the_session_is_touched(alice, alice_client):
    session = seed_conversation(alice, n=30, title="Cached")
    url = reverse("conversation_detail", args=[session.public_id])
    first, first_sql = _get(alice_client, url)
    assert _message_reads(first_sql)
    again, again_sql = _get(alice_client, url)
    ids = re.compile(r'id="m\d+"')
    assert ids.findall(again) == ids.findall(first)
    assert not _message_reads(again_sql)  # the chunk came from the cache
    append_message(session, role="user", content="a new line nobody has seen")
    after, after_sql = _get(alice_client, url)
    assert _message_reads(after_sql)
    assert "a new line nobody has seen" in after


def test_the_conversation_list_rows_are_rebuilt_after_an_append(alice, alice_client):
    session = seed_conversation(alice, n=10, title="Listed")
    url = reverse("conversation_list")
    rows = re.compile(r'<td class="num">([^<]*)</td>')
    first, first_sql = _get(alice_client, url)
    annotated = [q for q in first_sql if "n_messages" in q or "COUNT" in q.upper()]
    _, again_sql = _get(alice_client, url)
    assert len(again_sql) < len(first_sql)
    append_message(session, role="user", content="one more")
    after, _ = _get(alice_client, url)
    assert annotated
    assert rows.findall(after)[0] == str(int(rows.findall(first)[0]) + 1)


def test_the_inspector_panels_of_a_finished_run_are_built_once(alice, alice_client):
    run = compact_now(seed_conversation(alice, n=80), alice, mode="rotation")
    url = reverse("compaction_detail", args=[run.public_id])
    first, first_sql = _get(alice_client, url)
    assert 'id="final-list"' in first
    _, again_sql = _get(alice_client, url)
    # The panels read the whole report and the input and final rows; a hit reads neither
    # (the undo box outside the cached panels still asks for messages added since).
    assert len(_message_reads(again_sql)) < len(_message_reads(first_sql))
    this_report = re.compile(
        # The whole report, not one key of it (SQLite: JSON_EXTRACT(report, '$…'); PostgreSQL:
        # report -> / #>> …), read for this run.
        r'"hermes_web_compaction"\."report"(?!,\s*\'\$|\s*(?:->|#>))'
        r'.*WHERE "hermes_web_compaction"\."id" = ' + str(run.pk) + r"\b"
    )
    assert any(this_report.search(q) for q in first_sql)
    assert not any(this_report.search(q) for q in again_sql)
    assert len(again_sql) < len(first_sql)


def test_lazy_panels_build_once_and_only_what_is_read():
    calls = {"all": 0, "one": 0}

    def build():
        calls["all"] += 1
        return {"a": 1, "b": 2}

    def one():
        calls["one"] += 1
        return 3

    panels = LazyPanels(build, c=one)
    assert calls == {"all": 0, "one": 0}
    assert panels["c"] == 3
    assert panels["c"] == 3
    assert calls == {"all": 0, "one": 1}
    assert panels["a"] == 1
    assert panels["b"] == 2
    assert calls == {"all": 1, "one": 1}
    assert sorted(panels) == ["a", "b", "c"]
    with pytest.raises(KeyError):
        LazyPanels(c=one)["a"]


def test_every_lifetime_lives_in_caching():
    # The fragments' lifetimes are the ones the templates read.
    assert set(caching.FRAGMENT_SECONDS) == {"conversation_rows", "message_chunk", "window_nav"}
    assert caching.panel_seconds(type("Run", (), {"is_finished": False})()) == 0
    assert caching.panel_seconds(type("Run", (), {"is_finished": True})()) == caching.PANEL_SECONDS
