"""Claude Code transcripts written by the Agent SDK and by sessions moved from the web
(issue #25, a real ``~/.claude/projects`` folder of 2026, 239 files: 5 refused). Some SDK
builds wrote an assistant record's ``message`` as the raw server-sent event stream spread
into an object, one character per key (``{"0": "e", "1": "v", …, "content": "[]"}``), and a
session moved from Claude Code on the web starts with a ``teleported-from`` record (alone,
when nothing was said after). The stream's text and thinking become the assistant message,
and the moved, unused session is an empty session: no file refused."""

import json

import pytest

from hermes_web.importers import detect_format, import_path
from hermes_web.models import Message
from tests.web.agent_import_helpers import imported

pytestmark = pytest.mark.django_db
SID = "9b2e61d4-7c3a-4f5e-8d19-0a6c4e2b7f31"


def _sse(thinking: list[str], text: list[str]) -> str:
    events = [
        ("message_start", {"type": "message_start", "message": {"model": "claude-sonnet-4-6"}}),
        ("content_block_start", {"type": "content_block_start", "index": 0}),
        *(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"thinking": t}},
            )
            for t in thinking
        ),
        *(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 1, "delta": {"text": t}},
            )
            for t in text
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    body = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    return body + "data: [DONE]\n\n"


def _record(n: int, kind: str, message: dict) -> dict:
    return {
        "parentUuid": f"u-{n - 1}" if n else None,
        "isSidechain": False,
        "type": kind,
        "uuid": f"u-{n}",
        "timestamp": f"2026-03-29T22:3{n}:00.000Z",
        "entrypoint": "sdk-ts",
        "sessionId": SID,
        "version": "2.1.81",
        "message": message,
    }


def _transcript(tmp_path):
    stream = _sse(["The user typed ", "an error without details."], ["What error ", "do you see?"])
    spread = {str(i): ch for i, ch in enumerate(stream)} | {"content": "[]"}
    records = [
        {"type": "queue-operation", "operation": "enqueue", "sessionId": SID},
        _record(0, "user", {"role": "user", "content": "ERROR detected"}),
        _record(1, "assistant", spread),
        _record(2, "user", {"role": "user", "content": "the build fails on main"}),
    ]
    path = tmp_path / f"{SID}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_an_assistant_message_spread_as_its_stream_is_read_back(alice, tmp_path):
    (session,) = imported(_transcript(tmp_path), alice, "claude-code")
    reply = Message.objects.get(session=session, role="assistant")
    assert reply.content in (
        "What error do you see?",
        [{"type": "text", "text": "What error do you see?"}],
    )
    assert "an error without details." in str(reply.reasoning)
    skipped = session.extra["import_report"]["skipped"]
    assert skipped["assistant record holding its raw API stream (its text recovered)"] == 1


def test_a_session_moved_from_the_web_and_unused_is_empty_not_refused(alice, tmp_path):
    path = tmp_path / "0e6f3a18-2d4b-4c7e-9a51-6b8d2f0c4e97.jsonl"
    record = {"type": "teleported-from", "remoteSessionId": "session_01Vx", "messageCount": 0}
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert detect_format(path, path.name) == "claude-code"
    report = import_path(path, owner=alice)
    assert (report.refused, report.sessions, len(report.empties)) == ([], [], 1)
