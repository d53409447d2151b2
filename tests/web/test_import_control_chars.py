"""A NUL in an imported transcript is kept visibly as ␀ and counted; it never refuses the
session (PostgreSQL cannot store U+0000, so it must never reach the database either way:
these tests run on SQLite and, in CI, on PostgreSQL)."""

import json

import pytest

from hermes_web.importers import import_path
from hermes_web.management.commands.import_sessions import fidelity_line
from hermes_web.models import Message, Session

pytestmark = pytest.mark.django_db
SYMBOL = "\u2400"


def _jsonl(path, records) -> None:
    # json.dumps writes NUL as the escape \u0000, as the agents do
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _only_session(report):
    assert report.errors == [], [str(e) for e in report.errors]
    (session,) = report.sessions
    return session


def _rows(session):
    return list(Message.objects.filter(session=session).order_by("position"))


def test_a_nul_in_a_codex_call_output_is_shown_and_counted(alice, tmp_path):
    rollout = tmp_path / "rollout-2026-01-01T00-00-00-nul.jsonl"
    stamp = "2026-01-01T00:00:00Z"
    _jsonl(
        rollout,
        [
            {"timestamp": stamp, "type": "session_meta", "payload": {"id": "nul-codex"}},
            *(
                {"timestamp": stamp, "type": "response_item", "payload": item}
                for item in (
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": "cat the binary"}],
                    },
                    {
                        "type": "function_call",
                        "call_id": "c1",
                        "name": "shell",
                        "arguments": '{"command": ["cat", "a\x00.bin"]}',  # a raw NUL
                    },
                    {"type": "function_call_output", "call_id": "c1", "output": "ELF\x00\x00\x01"},
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "a binary"}],
                    },
                )
            ),
        ],
    )
    session = _only_session(import_path(rollout, owner=alice))
    tool = next(m for m in _rows(session) if m.role == "tool")
    assert tool.content == f"ELF{SYMBOL}{SYMBOL}\x01"  # other controls are storable: kept
    call = next(m for m in _rows(session) if m.tool_calls)
    assert call.tool_calls[0]["function"]["arguments"] == f'{{"command": ["cat", "a{SYMBOL}.bin"]}}'
    assert session.fidelity["control_characters_replaced"] == 3
    stored = Session.objects.get(pk=session.pk)
    assert stored.extra["import_report"]["control_characters_replaced"] == 3
    assert "3 control characters replaced" in fidelity_line(session.fidelity)


def _claude(kind, content, n, **more):
    role = "user" if kind == "user" else "assistant"
    message = {"role": role, "content": content}
    if role == "assistant":
        message["id"] = f"msg_{n}"
    return {
        "type": kind,
        "sessionId": "nul-claude",
        "uuid": f"u{n}",
        "timestamp": "2026-01-01T00:00:00Z",
        "message": message,
        **more,
    }


def test_a_nul_in_a_claude_code_tool_result_and_in_tool_arguments(alice, tmp_path):
    transcript = tmp_path / "nul-claude.jsonl"
    _jsonl(
        transcript,
        [
            _claude("user", "grep\x00the log", 1),
            _claude(
                "assistant",
                [{"type": "tool_use", "id": "t1", "name": "Grep", "input": {"pattern": "a\x00b"}}],
                2,
            ),
            _claude(
                "user",
                [{"type": "tool_result", "tool_use_id": "t1", "content": "x\x00y\x00z"}],
                3,
            ),
            _claude("assistant", [{"type": "text", "text": "done"}], 4),
        ],
    )
    session = _only_session(import_path(transcript, owner=alice))
    rows = _rows(session)
    call = next(m for m in rows if m.tool_calls)
    # arguments are JSON text: the NUL is already the storable escape \u0000 there
    assert call.tool_calls[0]["function"]["arguments"] == '{"pattern": "a\\u0000b"}'
    assert next(m for m in rows if m.role == "tool").content == f"x{SYMBOL}y{SYMBOL}z"
    assert rows[0].content == f"grep{SYMBOL}the log"
    assert session.title == f"grep{SYMBOL}the log"
    assert session.fidelity["control_characters_replaced"] == 3


def test_a_nul_in_session_metadata_and_in_a_whole_file_format(alice, tmp_path):
    export = tmp_path / "export.jsonl"
    line = {
        "id": "nul-hermes",
        "title": "t\x00",
        "model": "m",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "\x00"}]},
            {"role": "assistant", "content": "ok", "reasoning": "r\x00"},
        ],
    }
    export.write_text(json.dumps(line) + "\n")
    session = _only_session(import_path(export, owner=alice))
    rows = _rows(session)
    assert rows[0].content == [{"type": "text", "text": SYMBOL}]
    assert rows[1].reasoning == f"r{SYMBOL}"
    assert session.fidelity["control_characters_replaced"] >= 2
    assert "\x00" not in json.dumps([r.content for r in rows])


def test_a_clean_file_reports_no_replacement(alice, tmp_path):
    transcript = tmp_path / "clean.jsonl"
    _jsonl(transcript, [_claude("user", "hi", 1), _claude("assistant", "hello", 2)])
    session = _only_session(import_path(transcript, owner=alice))
    assert "control_characters_replaced" not in session.fidelity
    assert "control characters" not in fidelity_line(session.fidelity)
