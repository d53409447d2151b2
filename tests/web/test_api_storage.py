"""The JSON API: auth (cookie + CSRF, bearer keys), isolation between users, every route."""

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from hermes_web.models import ApiKey, Compaction, Session
from hermes_web.services.compactions import run_compaction
from hermes_web.services.sessions import append_message, create_session
from tests.web.compaction_helpers import SMALL_TAIL, conversation

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def bearer(raw: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


@pytest.fixture
def alice_key(alice):
    return ApiKey.issue(owner=alice, name="script")


# --- auth ------------------------------------------------------------------------------


def test_anonymous_gets_401(client):
    response = client.get("/api/sessions")
    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


def test_cookie_session_works(alice_client, alice):
    create_session(owner=alice, title="mine")
    response = alice_client.get("/api/sessions")
    assert response.status_code == 200
    assert [s["title"] for s in response.json()["items"]] == ["mine"]


def test_cookie_post_requires_csrf(alice):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    response = strict.post("/api/sessions", {"title": "x"}, content_type="application/json")
    assert response.status_code == 403
    assert not Session.objects.exists()


def test_bearer_key_works_without_csrf_and_records_use(alice, alice_key):
    key, raw = alice_key
    strict = Client(enforce_csrf_checks=True)
    response = strict.post(
        "/api/sessions", {"title": "from a script"}, content_type="application/json", **bearer(raw)
    )
    assert response.status_code == 201
    assert Session.objects.get().owner == alice
    key.refresh_from_db()
    assert key.last_used_at is not None


def test_key_use_is_written_at_most_once_a_minute(client, alice_key, monkeypatch):
    key, raw = alice_key
    assert client.get("/api/sessions", **bearer(raw)).status_code == 200
    key.refresh_from_db()
    first = key.last_used_at
    assert client.get("/api/sessions", **bearer(raw)).status_code == 200
    key.refresh_from_db()
    assert key.last_used_at == first  # no write, no row lock, within the minute
    later = first + timedelta(minutes=2)
    monkeypatch.setattr("hermes_web.auth.timezone.now", lambda: later)
    assert client.get("/api/sessions", **bearer(raw)).status_code == 200
    key.refresh_from_db()
    assert key.last_used_at == later


def test_a_known_key_is_checked_without_a_query(client, alice_key):
    key, raw = alice_key
    assert client.get("/api/sessions", **bearer(raw)).status_code == 200  # fills the cache
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/sessions", **bearer(raw)).status_code == 200
    touched = [
        q["sql"] for q in queries if "hermes_web_apikey" in q["sql"] or "auth_user" in q["sql"]
    ]
    assert touched == []


def test_revoked_or_wrong_key_gets_401(client, alice_key):
    key, raw = alice_key
    assert client.get("/api/sessions", **bearer(raw + "x")).status_code == 401
    assert client.get("/api/sessions", **bearer(raw)).status_code == 200  # now cached
    key.revoked_at = key.created_at
    key.save(update_fields=["revoked_at"])
    assert client.get("/api/sessions", **bearer(raw)).status_code == 401


def test_deleted_key_gets_401(client, alice_key):
    key, raw = alice_key
    assert client.get("/api/sessions", **bearer(raw)).status_code == 200
    key.delete()
    assert client.get("/api/sessions", **bearer(raw)).status_code == 401


def test_key_of_a_deactivated_user_gets_401(client, alice, alice_key):
    assert client.get("/api/sessions", **bearer(alice_key[1])).status_code == 200
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    assert client.get("/api/sessions", **bearer(alice_key[1])).status_code == 401


# --- isolation -------------------------------------------------------------------------


def test_another_users_ids_answer_404_everywhere(alice, bob_client):
    session = conversation(alice, n_messages=20)
    run = Compaction.objects.create(
        session=session, status="dry_run", report={"status": "compacted"}
    )
    sid, cid = session.public_id, run.public_id
    for method, url in [
        ("get", f"/api/sessions/{sid}"),
        ("delete", f"/api/sessions/{sid}"),
        ("get", f"/api/sessions/{sid}/tree"),
        ("get", f"/api/sessions/{sid}/messages"),
        ("get", f"/api/sessions/{sid}/compactions"),
        ("get", f"/api/sessions/{sid}/export"),
        ("get", f"/api/compactions/{cid}"),
        ("get", f"/api/compactions/{cid}/export"),
        ("post", f"/api/compactions/{cid}/commit"),
    ]:
        response = getattr(bob_client, method)(url)
        assert response.status_code == 404, (method, url)
        assert response.json() == {"detail": "Not Found"}
    for url, body in [
        (f"/api/sessions/{sid}/messages", {"role": "user", "content": "hi"}),
        (f"/api/sessions/{sid}/compactions", {}),
        (f"/api/sessions/{sid}/what-if", {}),
    ]:
        assert bob_client.post(url, body, content_type="application/json").status_code == 404, url
    assert bob_client.get("/api/sessions").json() == {"count": 0, "items": []}
    assert Session.objects.filter(pk=session.pk).exists()
    assert Compaction.objects.count() == 1


# --- sessions and messages -------------------------------------------------------------


def test_create_detail_and_delete(alice_client):
    created = alice_client.post(
        "/api/sessions",
        {"title": "plan", "compaction_mode": "in-place", "context_length": 64000},
        content_type="application/json",
    )
    assert created.status_code == 201
    body = created.json()
    assert (body["title"], body["compaction_mode"], body["context_length"]) == (
        "plan",
        "in_place",
        64000,
    )
    detail = alice_client.get(f"/api/sessions/{body['id']}").json()
    assert detail["tip"] == body["id"]
    assert alice_client.delete(f"/api/sessions/{body['id']}").status_code == 204
    assert alice_client.get(f"/api/sessions/{body['id']}").status_code == 404


def test_create_validates_input(alice_client):
    response = alice_client.post(
        "/api/sessions", {"compaction_mode": "sideways"}, content_type="application/json"
    )
    assert response.status_code == 422


def test_messages_append_and_paginate(alice_client, alice):
    session = create_session(owner=alice)
    url = f"/api/sessions/{session.public_id}/messages"
    for i in range(5):
        assert (
            alice_client.post(
                url, {"role": "user", "content": f"m{i}"}, content_type="application/json"
            ).status_code
            == 201
        )
    page = alice_client.get(url, {"limit": 2, "offset": 3}).json()
    assert page["count"] == 5
    assert [m["content"] for m in page["items"]] == ["m3", "m4"]
    assert page["items"][0]["token_count"] > 0
    # The count is cached with the session's numbers: the next append must move it.
    alice_client.post(url, {"role": "user", "content": "m5"}, content_type="application/json")
    assert alice_client.get(url, {"limit": 2, "offset": 3}).json()["count"] == 6


def test_append_rejects_bad_messages(alice_client, alice):
    session = create_session(owner=alice)
    url = f"/api/sessions/{session.public_id}/messages"
    assert (
        alice_client.post(
            url, {"role": "wizard", "content": "x"}, content_type="application/json"
        ).status_code
        == 422
    )
    tool = alice_client.post(url, {"role": "tool", "content": "x"}, content_type="application/json")
    assert tool.status_code == 422
    assert "tool_call_id" in tool.json()["detail"]
    assert alice_client.post(url, "{not json", content_type="application/json").status_code in (
        400,
        422,
    )
    assert not session.messages.exists()


def test_rotation_tree_and_append_to_rotated_session(alice_client, alice):
    session = conversation(alice)
    from hermes_web.services.compactions import request_compaction

    run = request_compaction(session=session, config_overrides=SMALL_TAIL, run_now=True)
    child = run.result_session.public_id
    tree = alice_client.get(f"/api/sessions/{child}/tree").json()
    assert [s["id"] for s in tree] == [session.public_id, child]
    assert tree[1]["parent"] == session.public_id
    assert alice_client.get(f"/api/sessions/{session.public_id}").json()["tip"] == child
    refused = alice_client.post(
        f"/api/sessions/{session.public_id}/messages",
        {"role": "user", "content": "x"},
        content_type="application/json",
    )
    assert refused.status_code == 409
    assert child in refused.json()["detail"]
    archived = alice_client.get(
        f"/api/sessions/{session.public_id}/messages", {"include_archived": True, "limit": 500}
    )
    assert archived.json()["count"] == session.messages.count()


# --- compactions -----------------------------------------------------------------------


def test_compaction_is_accepted_then_reported(
    alice_client, alice, django_capture_on_commit_callbacks
):
    session = conversation(alice)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = alice_client.post(
            f"/api/sessions/{session.public_id}/compactions",
            {"mode": "in-place", "focus": "tests", "config": SMALL_TAIL},
            content_type="application/json",
        )
    assert response.status_code == 202
    assert len(callbacks) == 1  # the task is sent only after commit
    body = response.json()
    assert (body["status"], body["mode"], body["focus"]) == ("queued", "in_place", "tests")
    again = alice_client.post(
        f"/api/sessions/{session.public_id}/compactions", {}, content_type="application/json"
    )
    assert again.status_code == 409
    run_compaction(Compaction.objects.get(public_id=body["id"]).pk)  # what the worker does
    detail = alice_client.get(f"/api/compactions/{body['id']}").json()
    assert detail["status"] == "committed"
    assert detail["report"]["status"] == "compacted"
    assert detail["tokens_after"] < detail["tokens_before"]


def test_bad_config_is_422_naming_the_field(alice_client, alice):
    session = conversation(alice, n_messages=10)
    response = alice_client.post(
        f"/api/sessions/{session.public_id}/compactions",
        {"config": {"tail_token_budget": -5}},
        content_type="application/json",
    )
    assert response.status_code == 422
    assert "tail_token_budget" in response.json()["detail"]
    assert not Compaction.objects.exists()


def test_what_if_then_commit(alice_client, alice, django_capture_on_commit_callbacks):
    session = conversation(alice)
    with django_capture_on_commit_callbacks(execute=False):
        dry = alice_client.post(
            f"/api/sessions/{session.public_id}/what-if",
            {"config": SMALL_TAIL},
            content_type="application/json",
        ).json()
    early = alice_client.post(f"/api/compactions/{dry['id']}/commit")
    assert early.status_code == 409
    run_compaction(Compaction.objects.get(public_id=dry["id"]).pk)
    with django_capture_on_commit_callbacks(execute=False):
        real = alice_client.post(f"/api/compactions/{dry['id']}/commit")
    assert real.status_code == 202
    assert real.json()["trigger"] == "manual"
    listed = alice_client.get(f"/api/sessions/{session.public_id}/compactions").json()
    assert [c["status"] for c in listed] == ["queued", "dry_run"]


# --- import / export -------------------------------------------------------------------


def test_import_upload(alice_client):
    upload = SimpleUploadedFile(
        "hermes_export.jsonl", (FIXTURES / "hermes_export.jsonl").read_bytes()
    )
    response = alice_client.post("/api/import", {"file": upload})
    assert response.status_code == 200
    body = response.json()
    assert body["format"] == "hermes-jsonl"
    assert [s["source_id"] for s in body["imported"]] == [  # ids are namespaced per user
        "20260511_180601_82f04a",
        "20260511_193215_1c9e0d",
        "api-de1f3305a7c44380",
    ]
    assert body["errors"] == []


def test_import_partial_failure_reports_errors(alice_client):
    data = (FIXTURES / "hermes_export.jsonl").read_bytes().splitlines(keepends=True)[0] + b"{oops\n"
    body = alice_client.post("/api/import", {"file": SimpleUploadedFile("x.jsonl", data)}).json()
    assert len(body["imported"]) == 1
    assert body["errors"][0]["line"] == 2
    assert "broken JSON" in body["errors"][0]["problem"]


def test_import_total_failure_is_400(alice_client):
    response = alice_client.post(
        "/api/import", {"file": SimpleUploadedFile("a.png", b"\x89PNG\r\n")}
    )
    assert response.status_code == 400
    assert "a.png, line 1: not a recognized format" in response.json()["detail"]


def test_import_too_large_is_413(alice_client, settings):
    settings.HERMES_MAX_UPLOAD_BYTES = 100
    upload = SimpleUploadedFile("big.json", b"[" + b" " * 200 + b"]")
    response = alice_client.post("/api/import", {"file": upload})
    assert response.status_code == 413
    assert not Session.objects.exists()


def test_import_bad_format_is_422(alice_client):
    upload = SimpleUploadedFile("x.json", b"[]")
    assert alice_client.post("/api/import", {"file": upload, "format": "yaml"}).status_code == 422


def test_import_with_bearer_key(client, alice, alice_key):
    upload = SimpleUploadedFile("chat.json", (FIXTURES / "openai_list.json").read_bytes())
    response = client.post("/api/import", {"file": upload}, **bearer(alice_key[1]))
    assert response.status_code == 200
    assert Session.objects.get().owner == alice


def test_export_formats(alice_client, alice):
    session = create_session(owner=alice, title="t")
    append_message(session, role="user", content="hello")
    openai = alice_client.get(f"/api/sessions/{session.public_id}/export")
    assert openai.status_code == 200
    assert openai["Content-Type"] == "application/json"
    assert openai.streaming  # streamed in chunks, never built whole in memory
    assert json.loads(b"".join(openai.streaming_content)) == [{"role": "user", "content": "hello"}]
    line = alice_client.get(f"/api/sessions/{session.public_id}/export", {"format": "hermes-jsonl"})
    assert json.loads(b"".join(line.streaming_content))["id"] == session.public_id
    assert (
        alice_client.get(f"/api/sessions/{session.public_id}/export", {"format": "pdf"}).status_code
        == 422
    )


def test_export_report(alice_client, alice):
    session = conversation(alice)
    from hermes_web.services.compactions import request_compaction

    run = request_compaction(
        session=session, trigger="what_if", config_overrides=SMALL_TAIL, run_now=True
    )
    md = alice_client.get(f"/api/compactions/{run.public_id}/export", {"format": "report-md"})
    assert md.content.decode().startswith("# Compaction report")
    doc = json.loads(alice_client.get(f"/api/compactions/{run.public_id}/export").content)
    assert doc["compaction"]["status"] == "dry_run"


def test_openapi_docs_list_the_routes(alice_client):
    schema = alice_client.get("/api/openapi.json").json()
    assert "/api/sessions/{session_id}/compactions" in schema["paths"]
    assert "413" in schema["paths"]["/api/import"]["post"]["responses"]
    page = schema["components"]["schemas"]["MessagePage"]["properties"]
    assert set(page) == {"count", "items"}
    message = schema["components"]["schemas"]["MessageOut"]["properties"]
    assert {"position", "role", "content", "tool_calls", "name", "created_at"} <= set(message)
