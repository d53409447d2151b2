"""Search over everything a user stored (issue #35 part 1): literals as people type them,
found in exactly the rows that hold them and never in another user's; phrases, prefixes,
short terms, filters; the API's schema, paging and refusals; the page without JavaScript.
Runs on SQLite (FTS5 trigram) and, with DATABASE_URL, on PostgreSQL (pg_trgm)."""

import datetime as dt
import json

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from hermes_web.models import Compaction, Message, Session

pytestmark = pytest.mark.django_db

SEARCH = "/api/search"

# Each literal, and where the seed below puts it: (owner's conversation key, position or
# "c" for the compaction, kind).
LITERALS = {
    "src/app/parser.py": {("a", 1, "message"), ("a", 2, "tool_call"), ("a", "c", "ledger")},
    "ECONNREFUSED": {("a", 3, "tool_result")},
    "--no-verify": {("a", 2, "tool_call")},
    "0x7f3a": {("a", 4, "message"), ("b", 0, "message")},
    "feat/login-v2": {("a", 1, "message"), ("a", "c", "summary")},
    "数据库连接": {("a", 4, "message")},
    "🚀": {("a", 4, "message")},
    "错误": {("b", 1, "message")},
    "KESTREL-FOLD-ORIGINAL": {("a", 3, "tool_result")},
    # Unescaped: the call's arguments are JSON text holding "C:\\Users\\dev\\app".
    r"C:\Users\dev": {("a", 2, "tool_call")},
    "ORCA native summary": {("b", "c", "native_summary")},
}


def seed(owner, *, prefix=""):
    """Two conversations of ``owner`` holding the literals (and a compaction of each)."""
    a = Session.objects.create(owner=owner, title=f"{prefix}parser work", source="chat")
    b = Session.objects.create(owner=owner, title=f"{prefix}imported", source="import:claude-code")
    rows = [
        Message(session=a, position=0, role="system", content="You are a coding agent."),
        Message(
            session=a,
            position=1,
            role="user",
            content=[{"type": "text", "text": "fix src/app/parser.py on feat/login-v2 please"}],
        ),
        Message(
            session=a,
            position=2,
            role="assistant",
            content=None,
            tool_calls=[
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "terminal",
                        "arguments": json.dumps(
                            {
                                "command": 'git commit --no-verify -m "wip" src/app/parser.py',
                                "cwd": r"C:\Users\dev\app",
                            }
                        ),
                    },
                }
            ],
        ),
        # The stored original of a folded tool result: archived by an in-place compaction,
        # still a row (the fold line replaced it in the context only).
        Message(
            session=a,
            position=3,
            role="tool",
            tool_call_id="call_1",
            content="error: connect ECONNREFUSED 127.0.0.1:5432 KESTREL-FOLD-ORIGINAL\n" * 3,
            active=False,
            archived=True,
        ),
        Message(session=a, position=4, role="assistant", content="数据库连接 failed at 0x7f3a 🚀"),
        Message(session=b, position=0, role="user", content="pointer 0X7F3A in the dump"),
        Message(session=b, position=1, role="assistant", content="出现错误了"),
    ]
    Message.objects.bulk_create(rows)
    ca = Compaction.objects.create(
        session=a,
        status="committed",
        report={
            "summary": "[CONTEXT COMPACTION] Goal: ship feat/login-v2",
            "ledger": {
                "facts": {"files": [{"text": "src/app/parser.py", "count": 2, "detail": "pr"}]},
                "left_to_recall": {},
            },
        },
    )
    cb = Compaction.objects.create(
        session=b, status="committed", source="claude-code", native_summary="ORCA native summary"
    )
    return {"a": a, "b": b, "ca": ca, "cb": cb}


def found(client, q, **params):
    response = client.get(SEARCH, {"q": q, "limit": 100, **params})
    assert response.status_code == 200, response.content
    return response.json()


def places(page, seeded):
    """The hits as (conversation key, position or "c", kind)."""
    keys = {seeded[k].public_id: k for k in ("a", "b")}
    return {
        (
            keys.get(h["conversation"], h["conversation"]),
            "c" if h["compaction"] else h["position"],
            h["kind"],
        )
        for h in page["items"]
    }


@pytest.fixture
def seeded(alice, bob):
    mine = seed(alice)
    seed(bob, prefix="bob ")  # every literal again, in another user's rows
    return mine


@pytest.mark.parametrize("literal", list(LITERALS))
def test_each_literal_is_found_in_exactly_the_rows_that_hold_it(alice_client, seeded, literal):
    page = found(alice_client, f'"{literal}"' if " " in literal else literal)
    assert places(page, seeded) == LITERALS[literal]
    assert page["count"] == len(LITERALS[literal])


def test_another_users_rows_are_never_hits(alice_client, bob_client, seeded, bob):
    bobs = {s.public_id for s in Session.objects.filter(owner=bob)}
    for literal in LITERALS:
        query = f'"{literal}"' if " " in literal else literal
        assert not {h["conversation"] for h in found(alice_client, query)["items"]} & bobs
        assert {h["conversation"] for h in found(bob_client, query)["items"]} <= bobs


def test_a_hit_carries_what_a_link_to_its_row_is_built_from(alice_client, seeded):
    (hit,) = found(alice_client, "ECONNREFUSED")["items"]
    a = seeded["a"]
    assert hit["conversation"] == a.public_id
    assert hit["conversation_title"] == "parser work"
    assert hit["source"] == "chat"
    assert (hit["position"], hit["role"], hit["kind"], hit["compaction"]) == (
        3,
        "tool",
        "tool_result",
        None,
    )
    assert hit["url"] == reverse("message_detail", args=[a.public_id, 3])
    assert "<mark>ECONNREFUSED</mark>" in hit["snippet_html"]
    assert "ECONNREFUSED" in hit["snippet"]
    (summary,) = found(alice_client, "ship feat")["items"]
    assert summary["compaction"] == seeded["ca"].public_id
    assert summary["position"] is None
    assert (
        summary["url"] == reverse("compaction_detail", args=[seeded["ca"].public_id]) + "#summary"
    )
    # The link opens the row (an archived one too).
    assert alice_client.get(hit["url"]).status_code == 200


def test_snippets_escape_html_and_mark_every_match(alice, alice_client):
    s = Session.objects.create(owner=alice)
    Message.objects.create(
        session=s, position=0, role="user", content="<script>alert(1)</script> Needle & needle"
    )
    (hit,) = found(alice_client, "needle")["items"]
    assert "<script>" not in hit["snippet_html"]
    assert "&lt;script&gt;" in hit["snippet_html"]
    assert hit["snippet_html"].count("<mark>") == 2
    assert "<mark>Needle</mark> &amp; <mark>needle</mark>" in hit["snippet_html"]


def test_phrases_must_appear_as_written_words_anywhere(alice_client, seeded):
    assert places(found(alice_client, '"connect ECONNREFUSED"'), seeded) == {
        ("a", 3, "tool_result")
    }
    assert found(alice_client, '"ECONNREFUSED connect"')["count"] == 0
    assert places(found(alice_client, "ECONNREFUSED connect"), seeded) == {("a", 3, "tool_result")}
    # Every word must appear in the same text.
    assert found(alice_client, "ECONNREFUSED login")["count"] == 0


def test_a_prefix_and_any_case_match(alice_client, seeded):
    assert places(found(alice_client, "econnref*"), seeded) == {("a", 3, "tool_result")}
    assert places(found(alice_client, "PARSER.PY"), seeded) == LITERALS["src/app/parser.py"]


def test_short_terms_are_found_and_the_result_says_how(alice_client, seeded):
    page = found(alice_client, "错误")
    assert page["partial"] is True
    assert page["notes"]
    # Beside a longer term, a short one filters that term's hits (no bound needed).
    page = found(alice_client, "🚀 0x7f3a")
    assert places(page, seeded) == {("a", 4, "message")}
    assert page["partial"] is False


def test_filters(alice_client, seeded, alice):
    assert places(found(alice_client, "src/app/parser.py", kind="tool_call"), seeded) == {
        ("a", 2, "tool_call")
    }
    assert places(found(alice_client, "src/app/parser.py", kind=["ledger", "message"]), seeded) == {
        ("a", 1, "message"),
        ("a", "c", "ledger"),
    }
    assert places(found(alice_client, "0x7f3a", role="user"), seeded) == {("b", 0, "message")}
    assert places(found(alice_client, "0x7f3a", source="import:claude-code"), seeded) == {
        ("b", 0, "message")
    }
    assert places(found(alice_client, "0x7f3a", conversation=seeded["a"].public_id), seeded) == {
        ("a", 4, "message")
    }
    # Dates: only the rows written that day.
    Message.objects.filter(session=seeded["b"], position=0).update(
        created_at=timezone.make_aware(dt.datetime(2025, 3, 10, 12))
    )
    assert places(
        found(alice_client, "0x7f3a", since="2025-03-10", until="2025-03-10"), seeded
    ) == {("b", 0, "message")}
    assert places(found(alice_client, "0x7f3a", since="2025-03-11"), seeded) == {
        ("a", 4, "message")
    }


def test_a_conversation_filter_covers_its_rotation_chain(alice_client, alice):
    root = Session.objects.create(owner=alice, title="root")
    child = Session.objects.create(owner=alice, title="child", parent=root, root=root)
    other = Session.objects.create(owner=alice, title="other")
    for session in (root, child, other):
        Message.objects.create(session=session, position=0, role="user", content="PELICAN-77")
    for session in (root, child):
        page = found(alice_client, "PELICAN-77", conversation=session.public_id)
        assert {h["conversation"] for h in page["items"]} == {root.public_id, child.public_id}


@pytest.mark.parametrize(
    ("params", "where"),
    [
        ({"q": ""}, "q:"),
        ({"q": "   "}, "q:"),
        ({"q": '"unclosed phrase'}, "quote"),
        ({"q": "x" * 501}, "501 characters"),
        ({"q": "ok", "kind": "folds"}, "kind: 'folds'"),
        ({"q": "ok", "role": "robot"}, "role: 'robot'"),
        ({"q": "ok", "source": "nowhere"}, "source: 'nowhere'"),
        ({"q": "ok", "since": "yesterday"}, "since: 'yesterday'"),
        ({"q": "ok", "since": "2025-02-02", "until": "2025-02-01"}, "after until"),
        ({"q": "ok", "conversation": "nope"}, "conversation: no conversation"),
    ],
)
def test_a_bad_query_is_a_400_saying_what_is_wrong(alice_client, params, where):
    response = alice_client.get(SEARCH, params)
    assert response.status_code == 400
    assert where in response.json()["detail"]


def test_another_users_conversation_cannot_be_named_as_a_filter(alice_client, seeded, bob):
    bobs = Session.objects.filter(owner=bob).first()
    response = alice_client.get(SEARCH, {"q": "0x7f3a", "conversation": bobs.public_id})
    assert response.status_code == 400


def test_the_api_pages_newest_first_and_needs_a_user(alice_client, alice):
    s = Session.objects.create(owner=alice)
    Message.objects.bulk_create(
        Message(session=s, position=i, role="user", content=f"needle number {i}") for i in range(25)
    )
    first = found(alice_client, "needle", limit=10)
    assert (first["count"], first["count_exact"], first["next_offset"]) == (25, True, 10)
    assert [h["position"] for h in first["items"]] == list(range(24, 14, -1))
    last = found(alice_client, "needle", limit=10, offset=20)
    assert [h["position"] for h in last["items"]] == [4, 3, 2, 1, 0]
    assert last["next_offset"] is None
    assert alice_client.get(SEARCH, {"q": "needle", "limit": 101}).status_code == 422
    assert Client().get(SEARCH, {"q": "needle"}).status_code == 401


def test_the_openapi_document_declares_the_route(alice_client):
    schema = alice_client.get("/api/openapi.json").json()
    get = schema["paths"]["/api/search"]["get"]
    assert set(get["responses"]) == {"200", "400", "401"}
    names = {p["name"] for p in get["parameters"]}
    assert {
        "q",
        "kind",
        "role",
        "source",
        "conversation",
        "since",
        "until",
        "limit",
        "offset",
    } <= names


def test_the_page_works_without_javascript(alice_client, seeded):
    response = alice_client.get(reverse("search"), {"q": "ECONNREFUSED"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "<mark>ECONNREFUSED</mark>" in page
    assert f'href="{reverse("message_detail", args=[seeded["a"].public_id, 3])}"' in page
    assert "#3 tool" in page
    assert 'data-kind="tool_result"' in page
    # A bad query: the form again, with what is wrong, as a 400.
    response = alice_client.get(reverse("search"), {"q": '"open'})
    assert response.status_code == 400
    assert "is not closed" in response.content.decode()


def test_each_hit_links_to_following_the_longest_term_through_its_chain(alice_client, seeded):
    response = alice_client.get(reverse("search"), {"q": 'fix "src/app/parser.py"'})
    page = response.content.decode()
    follow = reverse("follow_fact", args=[seeded["a"].public_id]) + "?q=src/app/parser.py"
    assert f'href="{follow}"' in page
    # The link opens the journey of that string.
    journey = alice_client.get(follow)
    assert journey.status_code == 200
    assert "src/app/parser.py" in journey.content.decode()


def test_the_page_pages_with_real_links_and_an_htmx_partial(alice_client, alice):
    s = Session.objects.create(owner=alice)
    Message.objects.bulk_create(
        Message(session=s, position=i, role="user", content=f"heron {i}") for i in range(25)
    )
    page = alice_client.get(reverse("search"), {"q": "heron"}).content.decode()
    assert 'href="?q=heron&amp;offset=20"' in page
    partial = alice_client.get(
        reverse("search"),
        {"q": "heron", "offset": 20},
        headers={"HX-Request": "true", "HX-Target": "search-results"},
    ).content.decode()
    assert partial.lstrip().startswith('<div id="search-results">')
    assert "heron</mark> 4" in partial
    assert "heron</mark> 20" not in partial
    assert "<html" not in partial


def test_every_page_has_the_search_box(alice_client):
    for name in ("conversation_list", "chat", "import_page"):
        page = alice_client.get(reverse(name)).content.decode()
        assert f'action="{reverse("search")}"' in page
        assert 'role="search"' in page


def test_the_page_needs_a_login(client):
    response = client.get(reverse("search"), {"q": "x"})
    assert response.status_code == 302
