"""Qwen Code chats (~/.qwen/projects/<cwd>/chats/<id>.jsonl): Claude-Code-like records whose
message is a Gemini Content, told apart from Claude Code by content, read with their calls,
results, thoughts and usage, and Qwen Code's chat compression kept as a native compaction."""

import json

import pytest

from hermes_web.importers import import_path
from hermes_web.importers.detect import detect_format
from hermes_web.importers.formats import qwen_code
from hermes_web.models import Compaction, Message, Session
from tests.web.agent_import_helpers import imported, pairs_ok, parsed, refused

pytestmark = pytest.mark.django_db
SESSION_ID = "5e0c2a1b-7d3f-4e8a-9b6c-2f1d0e9a8b7c"
SUMMARY = (
    "<state_snapshot>\n  <overall_goal>Make the parser stream.</overall_goal>\n</state_snapshot>"
)


def _record(n, kind, message=None, **more):
    record = {
        "uuid": f"u{n:03d}",
        "parentUuid": f"u{n - 1:03d}" if n > 1 else None,
        "sessionId": SESSION_ID,
        "timestamp": f"2026-03-01T10:{n:02d}:00.000Z",
        "type": kind,
        "cwd": "/home/me/parser",
        "version": "0.12.6",
        "gitBranch": "main",
    }
    if message is not None:
        record["message"] = message
    record.update(more)
    return record


def _user(n, text):
    return _record(n, "user", {"role": "user", "parts": [{"text": text}]})


def _rows():
    usage = {"promptTokenCount": 1200, "candidatesTokenCount": 40, "totalTokenCount": 1240}
    telemetry = {"uiEvent": {"event.name": "qwen-code.api_response", "input_token_count": 1200}}
    return [
        _user(1, "Why is the parser slow?"),
        _record(2, "system", subtype="ui_telemetry", systemPayload=telemetry),
        _record(
            3,
            "assistant",
            {
                "role": "model",
                "parts": [
                    {"text": "Read both files first.", "thought": True},
                    {"text": "Let me look."},
                    {"functionCall": {"id": "call_a", "name": "read_file",
                                      "args": {"absolute_path": "/p/parse.py"}}},
                    {"functionCall": {"id": "call_b", "name": "read_file",
                                      "args": {"absolute_path": "/p/missing.py"}}},
                ],
            },
            model="coder-model",
            usageMetadata=usage,
        ),
        _record(
            4,
            "tool_result",
            {"role": "user", "parts": [{"functionResponse": {
                "id": "call_a", "name": "read_file", "response": {"output": "def parse(): ..."}}}]},
            toolCallResult={"callId": "call_a", "status": "success"},
        ),
        _record(
            5,
            "tool_result",
            {"role": "user", "parts": [{"functionResponse": {
                "id": "call_b", "name": "read_file", "response": {"error": "File not found"}}}]},
            toolCallResult={"callId": "call_b", "status": "error"},
        ),
        _record(6, "assistant", {"role": "model", "parts": [{"text": "It reads it whole."}]},
                model="coder-model"),
        _user(7, "And the tests?"),
        _record(8, "assistant", {"role": "model", "parts": [
            {"text": "Look at CI.", "thought": True}, {"text": "They pass."}]}),
        _record(9, "system", subtype="slash_command",
                systemPayload={"phase": "invocation", "rawCommand": "/compress"}),
        _record(
            10,
            "system",
            subtype="chat_compression",
            systemPayload={
                "info": {"originalTokenCount": 48213, "newTokenCount": 2210,
                         "compressionStatus": 1},
                "compressedHistory": [
                    {"role": "user", "parts": [{"text": SUMMARY}]},
                    {"role": "model", "parts": [{"text": "Got it. Thanks for the context!"}]},
                    {"role": "user", "parts": [{"text": "And the tests?"}]},
                    {"role": "model", "parts": [{"text": "Look at CI.", "thought": True},
                                                {"text": "They pass."}]},
                ],
            },
        ),
        _record(11, "system", subtype="slash_command",
                systemPayload={"phase": "result", "rawCommand": "/compress"}),
        _user(12, "Now stream it."),
        _record(13, "assistant", {"role": "model", "parts": [{"text": "Done: it streams."}]},
                model="coder-model"),
        _record(14, "system", subtype="custom_title",
                systemPayload={"customTitle": "Streaming parser"}),
    ]  # fmt: skip


@pytest.fixture
def chat(tmp_path):
    path = tmp_path / f"{SESSION_ID}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    return path


def test_a_qwen_chat_is_detected_by_its_gemini_contents_not_read_as_claude_code(chat):
    assert detect_format(chat, chat.name) == "qwen-code"


def test_messages_calls_results_thoughts_and_usage(chat):
    (session,) = parsed(qwen_code.parse, chat)
    assert session.public_id == SESSION_ID
    assert session.title == "Streaming parser"  # the custom title record wins
    assert session.model == "coder-model"
    assert session.extra["qwen_code"] == {
        "cwd": "/home/me/parser",
        "version": "0.12.6",
        "gitBranch": "main",
    }
    rows = [m for m in session.messages if not m.meta]
    call = rows[1]
    assert call.role == "assistant"
    assert call.content == "Let me look."
    assert call.reasoning == "Read both files first."
    assert [c["id"] for c in call.tool_calls] == ["call_a", "call_b"]
    assert json.loads(call.tool_calls[0]["function"]["arguments"]) == {
        "absolute_path": "/p/parse.py"
    }
    assert call.extra["usage"]["promptTokenCount"] == 1200
    results = [m for m in rows if m.role == "tool"]
    assert [(r.tool_call_id, r.tool_name, r.content) for r in results] == [
        ("call_a", "read_file", "def parse(): ..."),
        ("call_b", "read_file", "File not found"),
    ]
    assert results[1].extra["status"] == "error"
    pairs_ok(session.messages)
    command = next(m for m in session.messages if m.meta)
    assert (command.meta, command.content) == ("command", "/compress")
    assert session.skipped["UI telemetry record"] == 1


def test_chat_compression_is_a_native_compaction(chat):
    (session,) = parsed(qwen_code.parse, chat)
    (compaction,) = session.native_compactions
    assert compaction.source == "qwen-code"
    assert (compaction.tokens_before, compaction.tokens_after) == (48213, 2210)
    assert compaction.summary == SUMMARY
    assert compaction.extra["compression_status"] == 1
    turns = [m for m in session.messages if not m.meta]
    replaced = [m for m in turns if m.replaced_by == 0]
    assert [m.role for m in replaced] == ["user", "assistant", "tool", "tool", "assistant"]
    assert all(m.archived and not m.active for m in replaced)
    summary = next(m for m in turns if m.is_summary)
    assert summary.summary_of == 0
    assert summary.active
    # Qwen Code sends the summary, then the Contents it kept, then what came after
    after = turns[turns.index(summary) + 1 :]
    assert [m.content for m in after] == [
        "And the tests?",
        "They pass.",
        "Now stream it.",
        "Done: it streams.",
    ]
    assert [m.kept_by for m in after] == [0, 0, None, None]
    assert all(m.active for m in after)
    assert compaction.extra["kept_rows"] == 2


def test_import_stores_the_session_its_compaction_and_a_fidelity_report(chat, alice):
    (session,) = imported(chat, alice, "qwen-code")
    assert session.source == Session.Source.IMPORT_QWEN_CODE
    compaction = Compaction.objects.get(session=session)
    assert compaction.source == "qwen-code"
    assert compaction.native_summary == SUMMARY
    assert (compaction.tokens_before, compaction.tokens_after) == (48213, 2210)
    fidelity = session.fidelity
    assert fidelity["tool_calls"] == fidelity["tool_results_paired"] == 2
    assert fidelity["stub_results"] == 0
    assert fidelity["archived"] == 5
    assert fidelity["summaries"] == 1
    stored = Message.objects.filter(session=session, active=True, role="tool")
    assert stored.count() == 0  # both results were compressed away


def test_a_call_never_answered_gets_a_marked_stub(tmp_path, alice):
    rows = _rows()[:3]  # the calls, then the file ends (the CLI was closed mid-run)
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = import_path(path, owner=alice)
    assert report.refused == []
    assert report.sessions[0].fidelity["stub_results"] == 2


def test_an_unknown_record_type_is_refused_with_its_line(tmp_path, alice):
    rows = [_user(1, "hi"), _record(2, "assistant", {"role": "model", "parts": []}),
            _record(3, "note", {"role": "user", "parts": []})]  # fmt: skip
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    problem = refused(path, alice)
    assert problem.line == 3
    assert "unknown record type 'note'" in problem.problem


def test_a_torn_last_line_keeps_everything_before_it(chat, alice, django_user_model):
    # A running Qwen Code leaves its newest record half-written.
    clean = import_path(chat, owner=django_user_model.objects.create_user("bo"))
    chat.write_bytes(chat.read_bytes() + b'{"uuid": "u-15", "type": "assistant", "message": {"ro')
    (session,) = parsed(qwen_code.parse, chat)
    assert session.torn_line == len(_rows()) + 1
    report = import_path(chat, owner=alice)
    assert not report.errors, [str(e) for e in report.errors]
    (stored,) = report.sessions
    assert stored.message_total == clean.sessions[0].message_total
    assert (
        Message.objects.filter(session=stored).count()
        == Message.objects.filter(session=clean.sessions[0]).count()
    )
