"""Issue #16: a hostile-input sweep across the API, the chat and the agent tools.

Every input is sent through the real entrance (the JSON API with an API key, the chat forms
with a logged-in browser session, ``run_tool`` as the agent loop calls it). The sweep then
stores the kinds of bad data older code let in straight into the database and opens every page
that renders it. It ends with zero 500s, zero half-stored sessions (a refused message leaves
the session exactly as it was) and zero pages broken by stored data, and prints its figures.
(Import files are swept by the importers' own tests.)
"""

import json
import math

import pytest
from django.db import DataError, transaction
from django.test import Client

from hermes_web.agent.tools import run_tool
from hermes_web.models import ApiKey, Compaction, Message, Session
from hermes_web.services.chat import start_chat
from hermes_web.services.compactions import request_compaction
from hermes_web.services.sessions import append_message

pytestmark = pytest.mark.django_db

SURROGATE = "\ud800"
BIG = 10**400


def _json(value) -> str:
    # allow_nan: the hostile body carries NaN/Infinity tokens, as some clients send
    return json.dumps(value, allow_nan=True)


def message_bodies() -> list:
    """Bodies for POST /api/sessions/{id}/messages that must all be refused with a 4xx."""
    good_call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    bodies: list = [
        {"role": "user", "content": "a" + SURROGATE + "b"},
        {"role": "user", "content": "\udfff"},
        {"role": "user", "content": "nul \x00 byte"},
        {"role": "user", "content": [{"type": "text", "text": "\x00"}]},
        {"role": "assistant", "content": "x", "reasoning": "\x00"},
        {"role": "user", "content": [{"type": "text", "text": SURROGATE}]},
        {"role": "user", "content": [{"type": "text"}]},
        {"role": "user", "content": [{"type": "text", "text": 5}]},
        {"role": "user", "content": [{"text": "no type"}]},
        {"role": "user", "content": ["bare string part"]},
        {"role": "user", "content": [{"type": "image_url"}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": 7}}]},
        {"role": "user", "content": {"type": "text", "text": "a dict"}},
        {"role": "user", "content": 5},
        {"role": "user", "content": BIG},
        {"role": "user", "content": True},
        {"role": "wizard", "content": "hi"},
        {"role": "", "content": "hi"},
        {"content": "no role"},
        {"role": "tool", "content": "result without a call id"},
        {"role": "tool", "content": "x", "tool_call_id": SURROGATE},
        {"role": "tool", "content": "x", "tool_call_id": "t" * 5000},
        {"role": "assistant", "content": "x", "name": SURROGATE},
        {"role": "assistant", "content": "x", "reasoning": "r" + SURROGATE},
        {"role": "assistant", "tool_calls": "not a list"},
        {"role": "assistant", "tool_calls": [1]},
        {"role": "assistant", "tool_calls": [None]},
        {"role": "assistant", "tool_calls": [{}]},
        {"role": "assistant", "tool_calls": [{"x": 1}]},
        {"role": "assistant", "tool_calls": [{"id": "c1"}]},
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": None}]},
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"arguments": "{}"}}]},
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": 5}}]},
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": ""}}]},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"a": 1}}}],
        },
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": SURROGATE}}],
        },
        {"role": "assistant", "tool_calls": [{**good_call, "type": "code_interpreter"}]},
        {"role": "assistant", "tool_calls": [{**good_call, "id": ""}]},
        {"role": "assistant", "tool_calls": [{**good_call, "id": 12}]},
        {"role": "assistant", "tool_calls": [good_call, {"id": "c2", "function": {}}]},
        {"role": "assistant", "tool_calls": [good_call] * 300},
        {"role": "assistant", "tool_calls": {"id": "c1"}},
        {"role": "user", "content": [{"type": "text", "text": "x", "deep": _deep(60)}]},
    ]
    return bodies


def _deep(levels: int):
    value: object = "bottom"
    for _ in range(levels):
        value = {"k": value}
    return value


RAW_MESSAGE_BODIES = [
    "",
    "null",
    "[]",
    "{",
    '{"role": "user", "content": "x"',
    '{"role": "user", "content": NaN}',
    '{"role": "user", "content": "\\ud800"}',
    '{"role": "user", "content": "ok", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}, "type": "function", "extra": Infinity}]}',
    "\xff\xfe garbage",
    '{"role": ["user"], "content": "x"}',
]

QUERY_URLS = [
    "/api/sessions?offset=1e20",
    "/api/sessions?offset=100000000000000000000",
    "/api/sessions?offset=-100000000000000000000",
    "/api/sessions?limit=100000000000000000000",
    "/api/sessions?limit=abc",
    "/api/sessions?offset=" + "9" * 5000,
    "/api/sessions/{sid}/messages?offset=99999999999999999999",
    "/api/sessions/{sid}/messages?limit=1e999",
    "/api/sessions/{sid}/messages?include_archived=maybe",
    "/api/sessions/..%2f..%2f/messages",
    "/api/sessions/%00",
    "/api/sessions/" + "x" * 3000,
    "/conversations/?offset=1e20",
    "/conversations/?page=99999999999999999999999",
    "/conversations/?q=%ED%A0%80",
    "/conversations/?source=%00",
    "/conversations/{sid}/?offset=99999999999999999999999",
    "/conversations/{sid}/?chunk=99999999999999999999999",
    "/conversations/{sid}/?chunk=1&offset=99999999999999999999999",
    "/conversations/{sid}/messages/99999999999999999999999/",
    "/static/%2e%2e/",
    "/static/%2e%2e/README.md",
    "/static/%2e%2e/%2e%2e/etc/passwd",
    "/static/..%2f..%2fetc%2fpasswd",
    "/static/%00",
    "/settings/api-keys/x/revoke/",
]


def compaction_bodies() -> list:
    return [
        {"config": {"context_length": BIG}},
        {"config": {"context_length": -BIG}},
        {"config": {"context_length": 10**20}},
        {"config": {"context_length": "lots"}},
        {"config": {"threshold_percent": math.nan}},
        {"config": {"threshold_percent": math.inf}},
        {"config": {"threshold_percent": -1}},
        {"config": {"tail_tokens": BIG}},
        {"config": {"protect_first_n": 10**30}},
        {"config": {"no_such_field": 1}},
        {"config": {SURROGATE: 1}},
        {"config": {"model": SURROGATE}},
        {"config": "not a dict"},
        {"config": [1, 2]},
        {"focus": SURROGATE},
        {"focus": "f" * 5000},
        {"mode": "sideways"},
        {"summarizer": "<script>alert(1)</script>"},
    ]


SESSION_BODIES = [
    {"context_length": BIG},
    {"context_length": -1},
    {"context_length": 1e999},
    {"context_length": "many"},
    {"title": SURROGATE},
    {"title": "t" * 300},
    {"model": "m" + SURROGATE},
    {"compaction_mode": "sideways"},
]

CHAT_TEXTS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "/compress",
    "/compress " + "f" * 10_000,
    "/mode sideways",
    "/mode",
    "/" * 500,
    "x" * 200_000,
    "<script>alert(1)</script>",
    "{{ 7*7 }}{% debug %}",
]

RAW_CHAT_BODIES = [
    b"message=%ED%A0%80",  # a surrogate's UTF-8-like bytes: not valid UTF-8
    b"message=%FF%FE",
    b"message=" + b"%00" * 100,
]

TOOL_CALLS = [
    ("read_file", '{"path": "notes.md", "offset": 1e999}'),
    ("read_file", '{"path": "notes.md", "limit": -1e999}'),
    ("read_file", '{"path": "notes.md", "offset": NaN}'),
    ("read_file", '{"path": "notes.md", "offset": "' + "9" * 5000 + '"}'),
    ("read_file", '{"path": "../../etc/passwd"}'),
    ("read_file", '{"path": "/etc/passwd"}'),
    ("read_file", '{"path": "~/.ssh/id_rsa"}'),
    ("read_file", '{"path": "a\\u0000b"}'),
    ("read_file", '{"path": "loop_a"}'),
    ("read_file", '{"path": "."}'),
    ("read_file", '{"path": null}'),
    ("read_file", '{"path": {"x": 1}}'),
    ("read_file", "[]"),
    ("read_file", "{"),
    ("read_file", '{"path": "notes.md", "surprise": 1}'),
    ("search_files", '{"pattern": "(a+)+$"}'),
    ("search_files", '{"pattern": "(x+x+)+y"}'),
    ("search_files", '{"pattern": "(a)\\\\1"}'),
    ("search_files", '{"pattern": "' + "a" * 5000 + '"}'),
    ("search_files", '{"pattern": "[", "target": "files"}'),
    ("search_files", '{"pattern": "x", "target": "elsewhere"}'),
    ("search_files", '{"pattern": "x", "path": "../.."}'),
    ("search_files", '{"pattern": "x", "limit": 1e999}'),
    ("search_files", '{"pattern": ""}'),
    ("list_files", '{"depth": 1e999}'),
    ("list_files", '{"path": "loop_b"}'),
    ("list_files", '{"path": "notes.md"}'),
    ("write_file", '{"path": ".git/hooks/pre-commit", "content": "x"}'),
    ("write_file", '{"path": ".github/workflows/x.yml", "content": "x"}'),
    ("write_file", '{"path": "loop_a", "content": "x"}'),
    ("write_file", '{"path": "../escape.txt", "content": "x"}'),
    ("write_file", '{"path": "big.txt", "content": "' + "x" * (1024 * 1024 + 1) + '"}'),
    ("write_file", '{"path": "n.txt", "content": 5}'),
    ("write_file", '{"path": "s.txt", "content": "\\ud800"}'),
    ("write_file", '{"path": "", "content": "x"}'),
    (
        "patch",
        '{"path": "notes.md", "old_string": "o", "new_string": "'
        + "o" * 100_000
        + '", "replace_all": true}',
    ),
    ("patch", '{"path": "notes.md", "old_string": "", "new_string": "x"}'),
    ("patch", '{"path": "notes.md", "old_string": "zzz", "new_string": "x"}'),
    ("patch", '{"path": "notes.md", "old_string": "o", "new_string": "x", "mode": "regex"}'),
    ("terminal", '{"command": "id"}'),
    ("no_such_tool", "{}"),
]


def stored_rows() -> list[dict]:
    """Rows that older code (or an older importer) stored: written to the database directly."""
    return [
        {"role": "user", "content": "lone " + SURROGATE + " surrogate"},
        {"role": "user", "content": [{"type": "text", "text": "part " + SURROGATE}]},
        {"role": "user", "content": [{"no": "type"}, "bare", 5, None]},
        {"role": "user", "content": {"weird": "dict"}},
        {"role": "user", "content": 12345},
        {"role": "assistant", "content": None, "tool_calls": "not a list"},
        {"role": "assistant", "content": None, "tool_calls": [1, None, "x"]},
        {"role": "assistant", "content": None, "tool_calls": [{"x": 1}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": None}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": 5, "function": {"name": 5, "arguments": {"a": 1}}}],
        },
        {
            "role": "assistant",
            "content": "calls " + SURROGATE,
            "tool_calls": [
                {"id": "c9", "function": {"name": "read" + SURROGATE, "arguments": SURROGATE}}
            ],
        },
        {"role": "tool", "content": "orphan " + SURROGATE, "tool_call_id": "nope"},
        {"role": "tool", "content": None, "tool_call_id": ""},
        {"role": "assistant", "content": "reply", "reasoning": {"not": "text"}},
    ]


@pytest.fixture
def ws(tmp_path, settings):
    import os

    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.md").write_text("hello world\n" * 10)
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    settings.HERMES_ENABLE_TERMINAL = False
    return root


def test_hostile_input_sweep(alice, ws, settings):  # noqa: C901 - one sweep, one report
    settings.HERMES_CHAT_MODEL = ""  # the offline demo model: no network
    web = Client(raise_request_exception=False)
    web.force_login(alice)
    _key, raw_key = ApiKey.issue(owner=alice, name="sweep")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw_key}"}
    figures = {"inputs": 0, "500s": 0, "half_stored": 0, "pages": 0, "broken_pages": 0}
    failures: list[str] = []

    def sent(label: str, response) -> None:
        figures["inputs"] += 1
        if response.status_code >= 500:
            figures["500s"] += 1
            failures.append(f"{label}: {response.status_code}")

    sid = web.post(
        "/api/sessions", _json({"title": "sweep"}), content_type="application/json", **auth
    ).json()["id"]
    session = Session.objects.get(public_id=sid)
    append_message(session, role="user", content="first")

    # API: messages (parsed bodies and raw bytes)
    before = Message.objects.filter(session=session).count()
    for body in message_bodies():
        response = web.post(
            f"/api/sessions/{sid}/messages", _json(body), content_type="application/json", **auth
        )
        sent(f"message {str(body)[:60]}", response)
        if response.status_code < 400:
            failures.append(f"accepted {str(body)[:80]}")
    for raw in RAW_MESSAGE_BODIES:
        response = web.post(
            f"/api/sessions/{sid}/messages", raw, content_type="application/json", **auth
        )
        sent(f"raw message {raw[:40]!r}", response)
        if response.status_code < 400:
            failures.append(f"accepted raw {raw[:80]!r}")
    if Message.objects.filter(session=session).count() != before:
        figures["half_stored"] += 1
        failures.append("a refused message was stored")

    # API: sessions and compactions
    sessions_before = Session.objects.filter(owner=alice).count()
    for body in SESSION_BODIES:
        response = web.post("/api/sessions", _json(body), content_type="application/json", **auth)
        sent(f"session {str(body)[:60]}", response)
        if response.status_code < 400:
            failures.append(f"accepted session {str(body)[:80]}")
    if Session.objects.filter(owner=alice).count() != sessions_before:
        figures["half_stored"] += 1
        failures.append("a refused session was stored")
    runs_before = Compaction.objects.count()
    for body in compaction_bodies():
        for route in ("compactions", "what-if"):
            response = web.post(
                f"/api/sessions/{sid}/{route}", _json(body), content_type="application/json", **auth
            )
            sent(f"{route} {str(body)[:60]}", response)
            if response.status_code < 400:
                failures.append(f"accepted {route} {str(body)[:80]}")
    if Compaction.objects.count() != runs_before:
        figures["half_stored"] += 1
        failures.append("a refused compaction was stored")

    # GET routes with hostile query strings and paths
    for url in QUERY_URLS:
        sent(url[:60], web.get(url.replace("{sid}", sid), **auth))
    sent("revoke 1-char", web.post("/settings/api-keys/a/revoke/"))
    sent("compare", web.post("/compare/", {"session": sid, "summarizer": "<b>x</b>"}))

    # Chat: the forms a browser posts
    chat = start_chat(owner=alice)
    for text in CHAT_TEXTS:
        sent(f"chat {text[:30]!r}", web.post(f"/chat/{chat.public_id}/send/", {"message": text}))
        sent(f"chat new {text[:30]!r}", web.post("/chat/new/", {"message": text}))
    for raw in RAW_CHAT_BODIES:
        response = web.post(
            f"/chat/{chat.public_id}/send/", raw, content_type="application/x-www-form-urlencoded"
        )
        sent(f"chat raw {raw[:30]!r}", response)

    # Tools: what a (prompt-injected) model can send
    for name, arguments in TOOL_CALLS:
        figures["inputs"] += 1
        try:
            result = json.loads(run_tool(name, arguments, workspace=ws))
        except Exception as exc:  # a tool raising out of the loop is the failure we count
            figures["500s"] += 1
            failures.append(f"tool {name} {arguments[:40]} raised {exc!r}")
            continue
        must_refuse = name in ("write_file", "patch", "terminal", "no_such_tool")
        if (must_refuse or "1e999" in arguments) and "error" not in result:
            failures.append(f"tool {name} {arguments[:60]} was not refused")
    assert (ws / "notes.md").read_text() == "hello world\n" * 10
    assert not (ws / ".git").exists()

    # Stored data: every page that renders it must still answer
    hostile = start_chat(owner=alice)
    unstorable = 0
    for row in stored_rows():
        figures["inputs"] += 1
        position = hostile.messages.count()
        try:
            with transaction.atomic():
                Message.objects.create(
                    session=hostile,
                    position=position,
                    role=row["role"],
                    content=row.get("content"),
                    tool_calls=row.get("tool_calls"),
                    tool_call_id=row.get("tool_call_id", ""),
                    reasoning=row.get("reasoning"),
                    token_count=10,
                )
        except DataError:  # PostgreSQL's jsonb refuses lone surrogates: such rows cannot exist
            unstorable += 1
    run = request_compaction(
        session=hostile,
        requested_by=alice,
        trigger=Compaction.Trigger.WHAT_IF,
        summarizer="deterministic",
        run_now=True,
    )
    run.refresh_from_db()
    pages = [
        f"/chat/{hostile.public_id}/",
        f"/conversations/{hostile.public_id}/",
        f"/conversations/{hostile.public_id}/?archived=1",
        f"/conversations/{hostile.public_id}/tree/",
        f"/conversations/{hostile.public_id}/timeline/",
        f"/conversations/{hostile.public_id}/what-if/",
        f"/compare/?session={hostile.public_id}",
        "/conversations/",
        "/chat/",
        f"/compactions/{run.public_id}/",
        f"/compactions/{run.public_id}/audit/",
        f"/compactions/{run.public_id}/report.json",
        f"/compactions/{run.public_id}/report.md",
        f"/api/sessions/{hostile.public_id}/messages",
        f"/api/compactions/{run.public_id}",
    ] + [
        f"/conversations/{hostile.public_id}/messages/{i}/" for i in range(hostile.messages.count())
    ]
    for page in pages:
        figures["pages"] += 1
        response = web.get(page, **auth)
        if response.status_code != 200:
            figures["broken_pages"] += 1
            failures.append(f"page {page}: {response.status_code}")
        sent(page, response)

    print(
        f"\nhostile sweep: {figures['inputs']} inputs, {figures['500s']} 500s, "
        f"{figures['half_stored']} half-stored, {figures['pages']} pages over stored bad data, "
        f"{figures['broken_pages']} broken (compaction run on them: {run.status}; "
        f"{unstorable} rows the database itself refused to store)"
    )
    assert figures["inputs"] >= 100
    assert failures == [], "\n".join(failures)
    assert figures["500s"] == 0
    assert figures["half_stored"] == 0
    assert figures["broken_pages"] == 0
