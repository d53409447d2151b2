"""Bounded memory: oversized bodies refused unread, exports streamed, conversation windows."""

import json
import re
import socket

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from hermes_web import exporters
from hermes_web.models import Message
from hermes_web.services.sessions import append_message, create_session, openai_messages
from hermes_web.views.conversations import CHUNK

pytestmark = pytest.mark.django_db


# --- request size ----------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/import/", "/api/import", "/api/sessions"])
def test_a_body_over_the_upload_limit_is_refused_before_it_is_read(alice_client, settings, path):
    settings.HERMES_MAX_UPLOAD_BYTES = 1024 * 1024
    # The declared length is 1 GiB and the body a few bytes: reading it would fail the test
    # client's payload ("Cannot read more than the available bytes").
    response = alice_client.post(
        path,
        data=b"x" * 10,
        content_type="application/octet-stream",
        CONTENT_LENGTH=str(2**30),
    )
    assert response.status_code == 413
    text = response.content.decode()
    # The import routes refuse in their own words (ImportUploadLimitMiddleware), the rest with
    # the declared size (RequestSizeLimitMiddleware); both from the header alone.
    assert "file is larger than 1 MB" in text if "import" in path else "1,073,741,824 bytes" in text
    assert "1 MB" in text
    if path.startswith("/api/"):
        assert "detail" in response.json()


@pytest.mark.django_db(transaction=True)
def test_a_live_server_answers_413_without_taking_the_body(live_server, settings):
    """Declare 1 GiB, send the headers only: the answer comes back at once."""
    settings.HERMES_MAX_UPLOAD_BYTES = 1024 * 1024
    host, port = live_server.thread.host, live_server.thread.port
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/import HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: multipart/form-data; boundary=x\r\n"
            b"Content-Length: 1073741824\r\n\r\n"
        )
        answer = sock.recv(4096).decode(errors="replace")
    assert answer.startswith("HTTP/1.1 413"), answer[:200]


# --- streamed exports ------------------------------------------------------------------


def _session_with_shapes(owner):
    session = create_session(owner=owner, title="shapes")
    append_message(session, role="system", content="sys\nline two")
    append_message(session, role="user", content=[{"type": "text", "text": "héllo"}])
    append_message(
        session,
        role="assistant",
        content=None,
        tool_calls=[
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
            }
        ],
        reasoning="thinking…",
    )
    append_message(session, role="tool", content="x" * 50, tool_call_id="c1", tool_name="read_file")
    for i in range(30):
        append_message(session, role="user" if i % 2 else "assistant", content=f"m{i}")
    return session


def test_streamed_exports_are_byte_identical_to_the_whole_document(alice, monkeypatch):
    monkeypatch.setattr(exporters, "BATCH", 7)
    session = _session_with_shapes(alice)
    chunks = list(exporters.iter_session_export(session, "openai"))
    assert len(chunks) >= 5  # produced batch by batch
    whole = json.dumps(openai_messages(session), ensure_ascii=False, indent=2) + "\n"
    assert "".join(chunks) == whole
    line = "".join(exporters.iter_session_export(session, "hermes-jsonl"))
    assert line == json.dumps(exporters.hermes_session(session), ensure_ascii=False) + "\n"
    empty = create_session(owner=alice, title="empty")
    assert exporters.export_session_text(empty, "openai") == "[]\n"
    assert json.loads(exporters.export_session_text(empty, "hermes-jsonl"))["messages"] == []


def test_the_api_export_streams(alice_client, alice, monkeypatch):
    monkeypatch.setattr(exporters, "BATCH", 5)
    session = _session_with_shapes(alice)
    response = alice_client.get(f"/api/sessions/{session.public_id}/export")
    assert response.status_code == 200
    assert response.streaming
    parts = list(response.streaming_content)
    assert len(parts) >= 5
    assert json.loads(b"".join(parts)) == openai_messages(session)


def test_export_session_command_streams_to_a_file(alice, tmp_path, monkeypatch):
    from django.core.management import call_command

    monkeypatch.setattr(exporters, "BATCH", 5)
    session = _session_with_shapes(alice)
    out = tmp_path / "out.jsonl"
    call_command("export_session", session.public_id, format="hermes-jsonl", output=str(out))
    assert json.loads(out.read_text())["message_count"] == 34


# --- the conversation window ------------------------------------------------------------


def test_a_window_of_huge_messages_stops_at_its_byte_budget(alice_client, alice):
    session = create_session(owner=alice, title="huge")
    for i in range(6):
        append_message(
            session, role="user" if i % 2 == 0 else "assistant", content=f"{i}" * 3_000_000
        )
    html = alice_client.get(f"/conversations/{session.public_id}/").content.decode()
    shown = len(re.findall(r'<article class="msg ', html))
    assert 1 <= shown <= 2, shown  # 4 MB budget: not six 3 MB rows in one page
    assert "Load more messages" in html
    assert "↓ Newest messages" in html


def test_windows_page_forward_and_back(alice_client, alice):
    session = create_session(owner=alice, title="many")
    Message.objects.bulk_create(
        [
            Message(
                session=session,
                position=i,
                role="user" if i % 2 == 0 else "assistant",
                content=f"m{i}",
            )
            for i in range(9 * CHUNK)
        ]
    )
    start = 4 * CHUNK + 20
    page = alice_client.get(f"/conversations/{session.public_id}/?start={start}").content.decode()
    assert len(re.findall(r'<article class="msg ', page)) == CHUNK
    assert "Earlier messages" in page
    assert f'href="?start={start - CHUNK}"' in page  # the previous window
    assert f'href="?start={8 * CHUNK}"' in page  # the newest window
    assert f'href="?start={start + CHUNK}"' in page  # load more
    with CaptureQueriesContext(connection):
        first = alice_client.get(f"/conversations/{session.public_id}/").content.decode()
    assert "Earlier messages" not in first


@pytest.mark.parametrize("start", ["99999999999999999999", "1e20", "-5", "abc"])
def test_an_out_of_range_start_is_not_an_error(alice_client, alice, start):
    session = create_session(owner=alice, title="s")
    append_message(session, role="user", content="hello")
    response = alice_client.get(f"/conversations/{session.public_id}/?start={start}")
    assert response.status_code == 200
