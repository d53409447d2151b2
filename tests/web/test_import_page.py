"""The Import page (works without JS; htmx gets the results partial) and the API keys page."""

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from hermes_web.models import ApiKey, Session

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def upload(name):
    return SimpleUploadedFile(name, (FIXTURES / name).read_bytes())


def test_import_page_requires_login(client):
    assert client.get("/import/").status_code == 302


def test_import_page_shows_the_form(alice_client):
    html = alice_client.get("/import/").content.decode()
    assert 'enctype="multipart/form-data"' in html
    assert 'name="file"' in html
    assert 'value="claude-code"' in html


def test_upload_without_js_shows_per_file_results(alice_client):
    response = alice_client.post(
        "/import/",
        {"file": [upload("codex_rollout.jsonl"), upload("openai_list.json")], "format": "auto"},
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>Import conversations</h1>" in html  # the full page
    assert "codex_rollout.jsonl" in html
    assert "0199104c-5c2a-7d83-b4f1-7e3c1b2a9d40" in html
    assert "openai_list.json" in html
    assert Session.objects.count() == 2


def test_htmx_upload_gets_only_the_results(alice_client):
    response = alice_client.post(
        "/import/", {"file": upload("claude_code_session.jsonl")}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="import-results"')
    assert "Add pagination to the todo list endpoint" in html


def test_errors_are_shown_with_file_and_line_and_escaped(alice_client):
    good = (FIXTURES / "hermes_export.jsonl").read_bytes().splitlines(keepends=True)[0]
    bad = SimpleUploadedFile(
        "<i>x.jsonl", good + b'{"id": "<script>", "messages": [{"role": "evil"}]}\n'
    )
    response = alice_client.post("/import/", {"file": bad})
    html = response.content.decode()
    assert response.status_code == 200  # one session imported
    assert "line 2: unknown role &#x27;evil&#x27;" in html
    assert "<script>" not in html
    assert "&lt;i&gt;x.jsonl" in html


def test_nothing_importable_is_400(alice_client):
    response = alice_client.post("/import/", {"file": SimpleUploadedFile("notes.txt", b"hello")})
    assert response.status_code == 400
    assert "not a recognized format" in response.content.decode()


def test_no_file_is_400(alice_client):
    response = alice_client.post("/import/", {"format": "auto"})
    assert response.status_code == 400
    assert "choose at least one file" in response.content.decode()


def test_too_large_is_413(alice_client, settings):
    settings.HERMES_MAX_UPLOAD_BYTES = 100
    response = alice_client.post("/import/", {"file": upload("openai_list.json")})
    assert response.status_code == 413
    assert not Session.objects.exists()


def test_htmx_upload_that_fails_entirely_still_shows_the_refusal(alice_client):
    """htmx does not swap 4xx answers: the partial comes with 200 and the errors in it."""
    response = alice_client.post(
        "/import/", {"file": SimpleUploadedFile("notes.txt", b"hello")}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    assert response["X-Import-Status"] == "400"
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="import-results"')
    assert 'role="alert"' in html
    assert "notes.txt, line 1: not a recognized format" in html


def test_duplicates_are_refused_on_the_page_unless_skipped(alice_client):
    assert alice_client.post("/import/", {"file": upload("codex_rollout.jsonl")}).status_code == 200
    again = alice_client.post("/import/", {"file": upload("codex_rollout.jsonl")})
    assert again.status_code == 400
    assert "already imported: a duplicate" in again.content.decode()
    skipped = alice_client.post(
        "/import/", {"file": upload("codex_rollout.jsonl"), "skip_existing": "on"}
    )
    assert skipped.status_code == 200
    assert "skipped: " in skipped.content.decode()
    assert Session.objects.count() == 1


def test_the_page_shows_the_fidelity_report(alice_client):
    name = "7c1e9a52-3b0d-4f8e-a6c4-91d2e5f0b7a3.jsonl"
    data = (FIXTURES / "claude_code" / name).read_bytes()
    html = alice_client.post("/import/", {"file": SimpleUploadedFile(name, data)}).content.decode()
    assert "4/4 tool calls paired" in html
    assert "meta rows" in html
    assert "progress record" in html  # what was not stored as a message, and why


def test_an_oversized_upload_is_refused_before_its_body_is_read(
    alice_client, settings, monkeypatch
):
    from django.http import multipartparser

    def never(*args, **kwargs):
        raise AssertionError("the body was parsed")

    monkeypatch.setattr(multipartparser.MultiPartParser, "parse", never)
    settings.HERMES_MAX_UPLOAD_BYTES = 1000

    def big():
        return SimpleUploadedFile("big.jsonl", b"x" * 200_000)

    response = alice_client.post("/import/", {"file": big()})
    assert response.status_code == 413
    assert "file is larger than" in response.content.decode()
    htmx = alice_client.post("/import/", {"file": big()}, HTTP_HX_REQUEST="true")
    assert htmx.status_code == 200
    assert htmx["X-Import-Status"] == "413"
    assert "file is larger than" in htmx.content.decode()
    api = alice_client.post("/api/import", {"file": big()})
    assert api.status_code == 413
    assert "larger than" in api.json()["detail"]
    assert not Session.objects.exists()


def test_an_upload_without_a_declared_length_stops_at_the_limit(alice_client, settings):
    settings.HERMES_MAX_UPLOAD_BYTES = 1000  # under the slack: the handler stops it while read
    response = alice_client.post(
        "/import/", {"file": SimpleUploadedFile("big.jsonl", b"x" * 20_000)}
    )
    assert response.status_code == 413
    assert not Session.objects.exists()


def test_api_hostile_numbers_and_types_are_a_400_naming_the_place(alice_client):
    bigint = b'[{"role": "user", "content": "hi", "n": ' + b"9" * 5000 + b"}]"
    response = alice_client.post("/api/import", {"file": SimpleUploadedFile("big.json", bigint)})
    assert response.status_code == 400
    assert "4300 digits" in response.json()["detail"]
    rollout = (
        b'{"type": "session_meta", "payload": {"id": "x1"}}\n'
        b'{"type": "response_item", "payload": {"type": "message", "role": "user", '
        b'"content": [{"type": "input_text", "text": 5}]}}\n'
    )
    response = alice_client.post(
        "/api/import", {"file": SimpleUploadedFile("rollout.jsonl", rollout)}
    )
    assert response.status_code == 400
    assert "rollout.jsonl, line 2: a input_text part's 'text' is int" in response.json()["detail"]
    assert not Session.objects.exists()


def test_api_reports_duplicates_and_fidelity(alice_client):
    first = alice_client.post("/api/import", {"file": upload("codex_rollout.jsonl")}).json()
    (session,) = first["imported"]
    assert session["source_id"] == "0199104c-5c2a-7d83-b4f1-7e3c1b2a9d40"
    assert session["fidelity"]["tool_calls"] == session["fidelity"]["tool_results_paired"] == 2
    again = alice_client.post("/api/import", {"file": upload("codex_rollout.jsonl")})
    assert again.status_code == 400
    assert again.json()["duplicates"][0]["session"] == "0199104c-5c2a-7d83-b4f1-7e3c1b2a9d40"
    skipped = alice_client.post(
        "/api/import", {"file": upload("codex_rollout.jsonl"), "skip_existing": "true"}
    )
    assert skipped.status_code == 200
    assert len(skipped.json()["skipped"]) == 1


# --- API keys ----------------------------------------------------------------------------


def test_create_key_shows_it_once_and_it_works(alice_client, alice):
    # POST, redirect, GET (issue #27): the key is on the page the redirect leads to.
    response = alice_client.post("/settings/api-keys/new/", {"name": "backup"}, follow=True)
    html = response.content.decode()
    key = ApiKey.objects.get(owner=alice)
    raw = html.split('id="raw-key" tabindex="0">')[1].split("</pre>")[0]
    assert ApiKey.hash(raw) == key.key_hash
    assert raw not in alice_client.get("/settings/api-keys/").content.decode()
    assert Client().get("/api/sessions", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200


def test_key_needs_a_name(alice_client):
    response = alice_client.post("/settings/api-keys/new/", {"name": " "})
    assert response.status_code == 400
    assert not ApiKey.objects.exists()


def test_revoke_key(alice_client, alice):
    key, raw = ApiKey.issue(owner=alice, name="old")
    response = alice_client.post(f"/settings/api-keys/{key.key_hash[:24]}/revoke/")
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert Client().get("/api/sessions", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401


def test_cannot_revoke_another_users_key(bob_client, alice):
    key, _ = ApiKey.issue(owner=alice, name="mine")
    assert bob_client.post(f"/settings/api-keys/{key.key_hash[:24]}/revoke/").status_code == 404
    key.refresh_from_db()
    assert key.revoked_at is None


def test_nav_links_to_api_keys(alice_client):
    assert b'href="/settings/api-keys/"' in alice_client.get("/import/").content
