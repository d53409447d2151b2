"""Gemini CLI chats (issue #25): the chat recording JSON, the newer JSONL log with its
``$set`` / ``$rewindTo`` records, ``logs.json`` and ``/chat save`` checkpoints; its own
compressions ("Context compressed from X% to Y%." markers, ``<state_snapshot>`` summaries,
history rewrites) as native compactions; bad input refused whole."""

import json

import pytest

from compaction.summary import is_summary_message
from hermes_web.importers import import_path
from hermes_web.importers.formats import gemini_cli
from hermes_web.models import Message, Session
from tests.web.agent_import_helpers import AGENTS, imported, pairs_ok, parsed, refused

pytestmark = pytest.mark.django_db
DIR = AGENTS / "gemini_cli"
RECORDING = DIR / "session-2026-03-02T10-14-5e1c7a20.json"
JSONL = DIR / "session-2026-03-05T08-00-9a2d4c61.jsonl"
LOGS = DIR / "logs.json"
CHECKPOINT = DIR / "checkpoint-billing.json"


def test_recording_turns_calls_results_thoughts_and_tokens():
    (session,) = parsed(gemini_cli.parse, RECORDING)
    assert session.public_id == "5e1c7a20-4b8e-4f0a-9d31-2c6f0e8a1b77"
    assert session.model == "gemini-2.5-pro"
    assert session.title.startswith("Why does the invoice total round")
    first = session.messages[1]
    assert first.role == "assistant"
    assert first.content == "I'll read the file first."
    assert first.reasoning == "**Locating the rounding**\nThe total is probably summed as floats."
    assert first.extra["tokens"]["total"] == 7236
    assert [c["function"]["name"] for c in first.tool_calls] == ["read_file", "run_shell_command"]
    assert json.loads(first.tool_calls[1]["function"]["arguments"]) == {
        "command": "pytest tests/test_total.py -q"
    }
    read, shell = session.messages[2], session.messages[3]
    assert read.content.startswith("def total(lines):")
    assert (shell.content, shell.extra["status"]) == (
        "Command exited with code 1: 1 failed",
        "error",
    )
    pairs_ok(session.messages)


def test_recording_compression_marker_is_a_native_compaction_archiving_what_came_before():
    (session,) = parsed(gemini_cli.parse, RECORDING)
    (compaction,) = session.native_compactions
    assert compaction.source == "gemini-cli"
    assert compaction.marker == "Context compressed from 68% to 3%."
    assert (compaction.extra["percent_before"], compaction.extra["percent_after"]) == (68, 3)
    assert compaction.summary == ""
    assert compaction.tokens_before is None
    replaced = [m for m in session.messages if m.replaced_by == 0]
    assert [m.role for m in replaced] == ["user", "assistant", "tool", "tool"]
    assert all(m.archived and not m.active for m in replaced)
    assert all(m.active for m in session.messages[4:] if not m.meta)


def test_recording_notes_commands_and_cancelled_calls():
    (session,) = parsed(gemini_cli.parse, RECORDING)
    metas = {m.meta: m.content for m in session.messages if m.meta}
    assert metas == {"command": "/stats", "error": "Request cancelled."}
    cancelled = next(m for m in session.messages if m.tool_call_id.startswith("replace-"))
    assert cancelled.extra["synthetic"]  # never answered: a marked stub, still paired
    assert session.skipped["slash command (kept as a meta row)"] == 1


def test_jsonl_log_replays_updates_rewinds_and_the_history_rewrite():
    (session,) = parsed(gemini_cli.parse, JSONL)
    assert session.public_id == "9a2d4c61-0e3f-4b1a-8c7d-5f6e7a8b9c0d"
    assert session.title == "Orders migrations and the created_at index"
    texts = [str(m.content) for m in session.messages]
    assert not any("only the ones after 0010" in t for t in texts)  # rewound away
    (compaction,) = session.native_compactions
    assert "history rewritten" in compaction.marker
    assert "orders.created_at" in compaction.summary
    assert compaction.summary.startswith("<state_snapshot>")
    archived = [m for m in session.messages if m.replaced_by == 0]
    assert [m.extra["gemini_id"] for m in archived if m.role != "tool"] == ["m1", "m2", "m4"]
    summary = next(m for m in session.messages if m.is_summary)
    assert summary.summary_of == 0
    assert summary.active
    # Stored as the agent wrote it; a prompt of ours wraps it so the engine reads it.
    assert summary.content == session.native_compactions[0].summary
    assert is_summary_message({"role": "user", "content": Message.prompt_content(summary.content)})
    assert session.messages[-1].content == "Thanks, that's all."
    # the re-written m2 record (tokens added) replaced the first one, not doubled it
    assert sum(1 for m in session.messages if m.extra.get("gemini_id") == "m2") == 1


def test_logs_json_is_one_session_per_session_id():
    sessions = parsed(gemini_cli.parse, LOGS)
    assert [s.public_id for s in sessions] == [
        "3b7f0c2e-1a4d-4e5f-9b8c-7d6e5f4a3b2c",
        "f1e2d3c4-b5a6-4978-8a9b-0c1d2e3f4a5b",
    ]
    assert sessions[0].title == "explain the retry loop in fetcher.go"
    assert sessions[0].messages[1].meta == "command"


def test_checkpoint_snapshot_is_the_summary_and_calls_pair_by_name():
    (session,) = parsed(gemini_cli.parse, CHECKPOINT)
    (compaction,) = session.native_compactions
    assert "Make invoice totals exact." in compaction.summary
    assert session.messages[0].is_summary
    assert session.messages[0].summary_of == 0
    call = next(m for m in session.messages if m.tool_calls)
    assert call.reasoning == "Planning the edit."
    result = session.messages[session.messages.index(call) + 1]
    assert result.tool_call_id == call.tool_calls[0]["id"]
    assert "Successfully" in result.content


@pytest.mark.parametrize("path", [RECORDING, JSONL, LOGS, CHECKPOINT], ids=lambda p: p.name)
def test_every_shape_imports_with_format_auto(alice, path):
    sessions = imported(path, alice, "gemini-cli")
    assert all(s.source == Session.Source.IMPORT_GEMINI_CLI for s in sessions)


def test_imported_recording_keeps_archived_rows_and_the_active_tail(alice):
    (session,) = imported(RECORDING, alice, "gemini-cli")
    rows = list(Message.objects.filter(session=session).order_by("position"))
    assert [r.archived for r in rows[:4]] == [True] * 4
    assert rows[-1].content.startswith("Switched the total to Decimal")
    assert rows[-1].active


def test_truncated_recording_is_refused_with_its_line(alice, tmp_path):
    path = tmp_path / "session-cut.json"
    path.write_bytes(RECORDING.read_bytes()[:900])
    problem = refused(path, alice)
    assert "broken JSON" in problem.problem
    assert problem.line > 1


def test_wrong_types_are_named_and_nothing_is_stored(alice, tmp_path):
    data = json.loads(RECORDING.read_text())
    data["messages"][1]["toolCalls"] = "read_file"
    path = tmp_path / "session-bad.json"
    path.write_text(json.dumps(data))
    problem = refused(path, alice)
    assert "message 2" in problem.problem
    assert "JSON string, expected array" in problem.problem
    data["messages"][1]["toolCalls"] = []
    data["messages"][0]["type"] = "wizard"
    path.write_text(json.dumps(data))
    assert "unknown type 'wizard'" in refused(path, alice).problem


def test_forced_format_on_another_file_is_a_clear_error(alice):
    problem = import_path(AGENTS.parent / "openai_list.json", owner=alice, fmt="gemini-cli")
    assert problem.sessions == []
    assert "not a Gemini CLI chat" in str(problem.errors[0])
