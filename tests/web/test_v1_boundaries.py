"""What Django and gunicorn answer before a /v1 view runs is JSON in the protocol's shape too
(issue #39: ``/v1/%00`` was a text/plain 400, a 60 KB header gunicorn's HTML 431)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from django.test import Client, RequestFactory

from hermes_web.views import errors
from tests.web.procfile_web import start_web

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def protocol_error(response, anthropic: bool = False) -> dict:
    assert response["Content-Type"].startswith("application/json"), response.content[:300]
    payload = json.loads(response.content)
    if anthropic:
        assert payload["type"] == "error"
        assert set(payload["error"]) == {"type", "message"}
    else:
        assert set(payload["error"]) == {"message", "type", "param", "code"}
    return payload


@pytest.mark.parametrize(
    ("path", "anthropic"),
    [("/v1/%00", False), ("/v1/chat/completions%00", False), ("/v1/messages%00", True)],
)
def test_a_nul_in_a_v1_path_is_a_json_400(path, anthropic):
    for method in ("get", "post"):
        response = getattr(Client(), method)(path)
        assert response.status_code == 400
        payload = protocol_error(response, anthropic)
        assert "NUL" in payload["error"]["message"]


def test_a_nul_elsewhere_keeps_the_routes_shape():
    assert Client().get("/conversations/?q=%00")["Content-Type"].startswith("text/plain")
    api = Client().get("/api/sessions/%00")
    assert api.status_code == 400
    assert "NUL" in api.json()["detail"]


@pytest.mark.parametrize(("path", "anthropic"), [("/v1/models", False), ("/v1/messages", True)])
def test_a_header_over_8_kib_is_a_json_431_on_v1(path, anthropic):
    response = Client().post(path, HTTP_X_PROBE="x" * 60_000)
    assert response.status_code == 431
    payload = protocol_error(response, anthropic)
    assert "X-Probe header is 60,000 characters" in payload["error"]["message"]
    assert Client().get("/healthz", HTTP_X_PROBE="x" * 8000).status_code in (200, 503)


def test_djangos_own_errors_on_v1_are_json_without_a_traceback():
    request = RequestFactory().post("/v1/chat/completions")
    for response in (
        errors.server_error(request),
        errors.bad_request(request, ValueError("/srv/app/secret.py")),
        errors.permission_denied(request, PermissionError("x")),
    ):
        payload = protocol_error(response)
        assert "/srv" not in payload["error"]["message"]
    assert json.loads(errors.server_error(request).content)["error"]["type"] == "server_error"
    page = errors.server_error(RequestFactory().get("/conversations/"))
    assert page["Content-Type"].startswith("text/html")


def test_the_urlconf_uses_these_handlers():
    from hermes_web import urls

    assert urls.handler500 == "hermes_web.views.errors.server_error"
    assert urls.handler400 == "hermes_web.views.errors.bad_request"


# -- behind gunicorn, as `make run` starts it ---------------------------------------------------


def raw_request(port: int, header_bytes: int, path: str = "/v1/models") -> tuple[int, str, bytes]:
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Probe: {'x' * header_bytes}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    kind = next(
        (
            line.split(":", 1)[1].strip()
            for line in lines
            if line.lower().startswith("content-type:")
        ),
        "",
    )
    return int(lines[0].split()[1]), kind, body


@pytest.mark.slow
def test_gunicorn_as_make_run_starts_it_lets_a_60_kb_header_reach_the_json_431(tmp_path):
    web, port = start_web(tmp_path)
    try:
        status, kind, body = raw_request(port, 60_000)
        assert (status, kind) == (431, "application/json")
        assert b"X-Probe header is 60,000 characters" in body
        # Past gunicorn's own ceiling (64 KiB a field) gunicorn answers before Django can.
        status, kind, _ = raw_request(port, 70_000)
        assert status in (400, 431)
        assert "json" not in kind
        # A request line up to gunicorn's ceiling (8190) reaches Django: a JSON 404 here.
        status, kind, _ = raw_request(port, 10, "/v1/" + "a" * 6000)
        assert (status, kind) == (404, "application/json")
    finally:
        os.killpg(web.pid, 15)
        web.wait(30)
