"""Issue #16, web basics: one test per finding of the hostile probe (each fails on the code
before the fix): throttling, password rules, CSP, deploy settings, echoed values, API-key
revoke by prefix, and the 500s on huge numbers, climbing static paths and bad stored data."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from hermes_web.models import ApiKey, Compaction, Message, Session
from hermes_web.services.sessions import append_message

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def web():
    return Client(raise_request_exception=False)


@pytest.fixture
def api(alice):
    _key, raw = ApiKey.issue(owner=alice, name="test")
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def post_json(client, url, body, **headers):
    return client.post(url, json.dumps(body), content_type="application/json", **headers)


# -- throttling and passwords ------------------------------------------------------------------


def test_wrong_passwords_are_throttled_per_address(web, alice, settings):
    settings.AXES_FAILURE_LIMIT = 5
    statuses = [
        web.post(
            "/accounts/login/",
            {"username": "alice", "password": f"wrong-{i}"},
            REMOTE_ADDR="198.51.100.7",
        ).status_code
        for i in range(8)
    ]
    assert statuses[:4] == [200] * 4  # the form again, with its error
    assert statuses[-1] == 429
    # Locked out: even the right password from that address is refused for now...
    locked = web.post(
        "/accounts/login/",
        {"username": "alice", "password": "alice-pass-123"},
        REMOTE_ADDR="198.51.100.7",
    )
    assert locked.status_code == 429
    assert b"Too many" in locked.content
    # ...while another address still signs in.
    other = web.post(
        "/accounts/login/",
        {"username": "alice", "password": "alice-pass-123"},
        REMOTE_ADDR="198.51.100.8",
    )
    assert other.status_code == 302


def test_signups_are_throttled_per_address(web, settings):
    settings.HERMES_SIGNUP_PER_HOUR = 3
    statuses = [
        web.post(
            "/accounts/signup/",
            {"username": f"u{i}", "password1": "x", "password2": "y"},
            REMOTE_ADDR="203.0.113.9",
        ).status_code
        for i in range(5)
    ]
    assert statuses == [200, 200, 200, 429, 429]


def test_numeric_only_passwords_are_refused(web):
    response = web.post(
        "/accounts/signup/",
        {"username": "carol", "password1": "8675309123456", "password2": "8675309123456"},
        REMOTE_ADDR="203.0.113.10",
    )
    assert response.status_code == 200
    assert b"entirely numeric" in response.content
    assert not Session.objects.exists()
    from django.contrib.auth import get_user_model

    assert not get_user_model().objects.filter(username="carol").exists()


# -- CSP and deploy settings -------------------------------------------------------------------


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
INLINE_HANDLER = re.compile(r"""\s(on[a-z]+|hx-on[:\w-]*)\s*=""", re.IGNORECASE)


def test_every_page_has_a_strict_csp_and_no_inline_script(alice, web):
    web.force_login(alice)
    session = Session.objects.create(owner=alice, title="csp")
    append_message(session, role="user", content="hello")
    pages = [
        "/conversations/",
        f"/conversations/{session.public_id}/",
        "/chat/",
        f"/chat/{session.public_id}/",
        "/compare/",
        "/import/",
        "/settings/api-keys/",
    ]
    for page in pages:
        response = web.get(page)
        assert response.status_code == 200, page
        policy = response["Content-Security-Policy"]
        script_src = re.search(r"script-src ([^;]*)", policy).group(1)
        assert "'self'" in script_src
        assert "unsafe-inline" not in script_src
        assert "unsafe-eval" not in script_src
        assert "frame-ancestors 'none'" in policy
        html = response.content.decode()
        assert not INLINE_SCRIPT.search(html), (page, INLINE_SCRIPT.search(html).group(0))
        assert not INLINE_HANDLER.search(html), (page, INLINE_HANDLER.search(html).group(0))


def _deploy_check(tmp_path, **env) -> subprocess.CompletedProcess:
    environment = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DEBUG": "false",
        "HERMES_DATA_DIR": str(tmp_path),
        "SECRET_KEY": "k" * 20 + "-a-long-random-production-secret-key-0123456789",
        "ALLOWED_HOSTS": "hermes.example.org",
        **env,
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_passes_behind_https_with_the_documented_switch(tmp_path):
    result = _deploy_check(tmp_path, HERMES_HTTPS="1", HERMES_BEHIND_PROXY="1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
    # Without the switch (plain HTTP on 127.0.0.1, as `make run` serves) the check says so.
    plain = _deploy_check(tmp_path)
    assert plain.returncode != 0
    assert "SECURE_HSTS_SECONDS" in plain.stdout + plain.stderr


# -- echoed values -----------------------------------------------------------------------------


def test_compare_never_reflects_a_posted_value_as_html(alice, web):
    web.force_login(alice)
    session = Session.objects.create(owner=alice, title="x")
    append_message(session, role="user", content="hello")
    payload = "<script>alert(document.cookie)</script>"
    response = web.post("/compare/", {"session": session.public_id, "summarizer": payload})
    assert response.status_code == 400
    body = response.content.decode()
    is_html = response["Content-Type"].startswith("text/html")
    assert not (is_html and payload in body)
    assert response["X-Content-Type-Options"] == "nosniff"


# -- API key revoke by id prefix ---------------------------------------------------------------


def _key_with_hash(owner, name, key_hash):
    return ApiKey.objects.create(owner=owner, name=name, prefix="hw_x", key_hash=key_hash)


def test_an_ambiguous_key_prefix_revokes_nothing_and_says_why(alice, web):
    web.force_login(alice)
    one = _key_with_hash(alice, "one", "abcdef0123456789" + "1" * 48)
    two = _key_with_hash(alice, "two", "abcdef0123456789" + "2" * 48)
    response = web.post("/settings/api-keys/abcdef0123456789/revoke/")
    assert response.status_code == 409
    assert "more than one" in response.content.decode()
    one.refresh_from_db()
    two.refresh_from_db()
    assert one.revoked_at is None
    assert two.revoked_at is None
    # A longer prefix picks exactly one.
    assert web.post(f"/settings/api-keys/{one.key_hash[:24]}/revoke/").status_code == 302
    one.refresh_from_db()
    two.refresh_from_db()
    assert one.revoked_at is not None
    assert two.revoked_at is None


def test_a_one_character_prefix_revokes_nothing(alice, web):
    web.force_login(alice)
    key = _key_with_hash(alice, "only", "f" * 64)
    response = web.post("/settings/api-keys/f/revoke/")
    assert response.status_code == 400
    key.refresh_from_db()
    assert key.revoked_at is None


# -- the 500s ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query", ["offset=100000000000000000000", "limit=100000000000000000000", "offset=1e20"]
)
def test_a_huge_page_offset_is_a_422_naming_it(alice, web, api, query):
    session = Session.objects.create(owner=alice, title="x")
    append_message(session, role="user", content="hello")
    for url in (f"/api/sessions?{query}", f"/api/sessions/{session.public_id}/messages?{query}"):
        response = web.get(url, **api)
        assert response.status_code == 422, url
        assert response.json()["detail"][0]["loc"][-1] == query.split("=")[0]


def test_a_huge_offset_on_a_page_is_not_a_500(alice, web):
    web.force_login(alice)
    session = Session.objects.create(owner=alice, title="x")
    for i in range(3):
        append_message(session, role="user", content=f"m{i}")
    huge = "9" * 25
    assert web.get(f"/conversations/?offset={huge}").status_code == 200
    response = web.get(
        f"/conversations/{session.public_id}/?chunk=1&offset={huge}", HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/static/%2e%2e/",
        "/static/%2e%2e/README.md",
        "/static/%2e%2e/%2e%2e/etc/passwd",
        "/static/..%2f..%2fetc%2fpasswd",
    ],
)
def test_a_static_path_that_climbs_out_is_a_404(web, path):
    # The served app (gunicorn → hermes_web.wsgi) routes /static/ through urls.static_files.
    response = web.get(path)
    assert response.status_code == 404


def test_static_files_are_still_served(web):
    response = web.get("/static/hermes_web/app.css")
    assert response.status_code == 200


def test_a_context_length_of_400_digits_is_a_422_naming_the_field(alice, web, api):
    session = Session.objects.create(owner=alice, title="x")
    append_message(session, role="user", content="hello")
    for route in ("compactions", "what-if"):
        response = post_json(
            web,
            f"/api/sessions/{session.public_id}/{route}",
            {"config": {"context_length": 10**400}},
            **api,
        )
        assert response.status_code == 422
        assert "config.context_length" in json.dumps(response.json())
    assert not Compaction.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"role": "user", "content": "a\\ud800b"}', "content"),
        ('{"role": "user", "content": [{"type": "text", "text": "\\udfff"}]}', "content[0].text"),
        ('{"role": "assistant", "tool_calls": [{"x": 1}]}', "tool_calls[0].id"),
        ('{"role": "assistant", "tool_calls": ["call"]}', "tool_calls[0]"),
        (
            '{"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}',
            "tool_calls[0].function.name",
        ),
        (
            '{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}]}',
            "tool_calls[0].function.arguments",
        ),
        ('{"role": "tool", "tool_call_id": "\\ud800", "content": "x"}', "tool_call_id"),
    ],
)
def test_bad_text_and_malformed_tool_calls_are_refused_at_the_api_with_a_422(
    alice, web, api, body, field
):
    session = Session.objects.create(owner=alice, title="x")
    response = web.post(
        f"/api/sessions/{session.public_id}/messages",
        body,
        content_type="application/json",
        **api,
    )
    assert response.status_code == 422
    error = response.json()["detail"][0]
    # Named either by pydantic's location or, for nested places, by the message itself.
    where = ".".join(str(part) for part in error["loc"][2:]).replace(".0", "[0]")
    assert f"{field}:" in error["msg"] or where == field, error
    assert not Message.objects.filter(session=session).exists()


def test_pages_render_rows_stored_with_surrogates_or_malformed_tool_calls(alice, web):
    from django.db import connection

    web.force_login(alice)
    session = Session.objects.create(owner=alice, title="bad rows")
    rows = [
        {"role": "assistant", "content": None, "tool_calls": [{"x": 1}, "call", None]},
        {"role": "assistant", "content": None, "tool_calls": "not a list"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": 5, "function": "f"}]},
    ]
    # PostgreSQL's jsonb cannot hold a lone surrogate at all; SQLite stored them.
    surrogates = connection.vendor == "sqlite"
    if surrogates:
        rows += [
            {"role": "user", "content": "lone \ud800 surrogate"},
            {"role": "assistant", "content": "markdown \udfff *reply*"},
            {"role": "tool", "content": "result \ud800", "tool_call_id": "c1"},
        ]
    for position, row in enumerate(rows):
        Message.objects.create(session=session, position=position, token_count=5, **row)
    for page in (
        f"/chat/{session.public_id}/",
        f"/conversations/{session.public_id}/",
        f"/conversations/{session.public_id}/messages/{len(rows) - 1}/",
    ):
        response = web.get(page)
        assert response.status_code == 200, page
        if surrogates:
            assert "\ufffd".encode() in response.content
    listing = web.get(
        f"/api/sessions/{session.public_id}/messages",
        **{"HTTP_AUTHORIZATION": f"Bearer {ApiKey.issue(owner=alice, name='k')[1]}"},
    )
    assert listing.status_code == 200
    assert listing.json()["count"] == len(rows)


def test_a_nul_character_is_a_400_at_every_entrance_and_stores_nothing(alice, web, api):
    """PostgreSQL refuses NUL in any text: on `make test-postgres` these were 500s."""
    web.force_login(alice)
    chats = Session.objects.filter(owner=alice).count()
    assert web.post("/chat/new/", {"message": "hi\x00there"}).status_code == 400
    assert Session.objects.filter(owner=alice).count() == chats
    session = Session.objects.create(owner=alice, title="x")
    response = web.post(f"/chat/{session.public_id}/send/", {"message": "a\x00b"})
    assert response.status_code == 400
    assert "NUL" in response.content.decode()
    assert not Message.objects.filter(session=session).exists()
    assert web.get("/api/sessions/%00", **api).status_code == 400
    assert web.get("/conversations/?q=%00").status_code == 400
    response = post_json(
        web,
        f"/api/sessions/{session.public_id}/messages",
        {"role": "user", "content": "\x00"},
        **api,
    )
    assert response.status_code == 422
    assert "NUL" in response.json()["detail"][0]["msg"]


def test_real_world_message_shapes_pass_the_entrance_checks(alice, web, api):
    """Shapes met in public Hermes session files and client fixtures: Korean text with
    markdown, a call without "type" or "arguments", extra keys on a call (Responses-API ids),
    a JSON tool result with null fields, parallel calls. None may be refused."""
    session = Session.objects.create(owner=alice, title="real shapes")
    url = f"/api/sessions/{session.public_id}/messages"
    bodies = [
        {"role": "system", "content": "You are Hermes."},
        {"role": "user", "content": "[사용자] 웹소설 + 웹툰 전체 파이프라인 그려와. *20컷* 분량."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_ac2b1eab18aa419088bf922b",
                    "type": "function",
                    "function": {
                        "name": "terminal",
                        "arguments": '{"command": "cd ~/wiki && git status --short", "timeout": 30}',
                    },
                },
                {"id": "call_123", "function": {"name": "read_file"}},
                {
                    "id": "call_9",
                    "response_item_id": "fc_toolu_01NrZ5XYPi",
                    "type": "function",
                    "function": {"name": "delegate_task", "arguments": '{"goal": "..."}'},
                },
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_ac2b1eab18aa419088bf922b",
            "name": "terminal",
            "content": '{"output": "✅ 24 pages | fixes=2 err=0 warn=0\\nEXIT=0", "exit_code": 0, "error": null}',
        },
        {"role": "tool", "tool_call_id": "call_123", "content": "success"},
        {"role": "tool", "tool_call_id": "call_9", "content": ""},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "이 그림은?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        },
        {"role": "assistant", "content": "네.", "reasoning": "사용자가 이미지를 보냈다."},
    ]
    for body in bodies:
        response = post_json(web, url, body, **api)
        assert response.status_code == 201, (body, response.content)
    assert Message.objects.filter(session=session).count() == len(bodies)
    refused = post_json(web, url, {"role": "session_meta", "tools": []}, **api)
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"][-1] == "role"
    web.force_login(alice)
    for page in (f"/conversations/{session.public_id}/", f"/chat/{session.public_id}/"):
        assert web.get(page).status_code == 200, page
