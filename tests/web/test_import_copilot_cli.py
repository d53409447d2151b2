"""Copilot CLI events.jsonl: turns, tool executions paired with their requests, sub-agents
as linked sessions, and Copilot's own compaction as a NativeCompaction."""

import json
from pathlib import Path

import pytest

from hermes_web.importers import import_path
from hermes_web.importers.base import pair_tool_results
from hermes_web.importers.detect import detect_format
from hermes_web.importers.formats import copilot_cli
from hermes_web.models import Message, Session

pytestmark = pytest.mark.django_db
SESSION_ID = "3c9d2f14-8e6a-4b7c-a1d5-0f2e4c6b8a90"
FIXTURE = Path(__file__).resolve().parent.parent / f"fixtures/agents/copilot_cli/{SESSION_ID}"
EVENTS = FIXTURE / "events.jsonl"


def _parse(path, name=None):
    with open(path, "rb") as stream:
        sessions = list(copilot_cli.parse(stream, name or str(path)))
    for session in sessions:
        pair_tool_results(session)
    return sessions


def test_detected_as_copilot_cli():
    assert detect_format(EVENTS, "events.jsonl") == "copilot-cli"


def test_turns_calls_and_the_compaction_copilot_recorded():
    main, agent = _parse(EVENTS)
    assert main.public_id == SESSION_ID
    assert main.model == "gpt-5.4"
    assert main.title == "The CSV export drops the last row; find out why."
    assert main.extra["copilot_cli"]["copilotVersion"] == "1.0.41"
    assert main.extra["copilot_cli"]["codeChanges"]["filesModified"] == ["src/export.py"]

    (compaction,) = main.native_compactions
    assert compaction.source == "copilot-cli"
    assert compaction.trigger == "auto"  # "threshold"
    assert compaction.tokens_before == 122874
    assert compaction.summary.startswith("<overview>Fixing the CSV export")
    assert compaction.extra["start"]["toolDefinitionsTokens"] == 12210
    assert compaction.extra["complete"]["compactionTokensUsed"] == {"input": 101544, "output": 612}

    turns = [m for m in main.messages if not m.meta]
    replaced = [m for m in turns if m.replaced_by == 0]
    assert len(replaced) == 8
    assert all(m.archived and not m.active for m in replaced)
    # archived rows stay paired in call order, for a replay of this compaction
    assert [m.tool_call_id for m in replaced if m.role == "tool"] == [
        "call_view_1",
        "call_patch_1",
        "call_sh_1",
        "call_task_1",
    ]
    summary = next(m for m in turns if m.is_summary)
    assert summary.summary_of == 0
    assert "len(rows) - 1" in summary.content
    assert [m.content for m in turns if m.active][1:] == [
        "Go ahead and fix the header case.",
        "Done: the header is written before the loop; all tests pass.",
    ]

    first_call = next(m for m in turns if m.tool_calls)
    assert first_call.reasoning == "Look at the exporter loop bounds."
    patch = next(m for m in turns if m.tool_calls and len(m.tool_calls) == 2)
    assert patch.tool_calls[0]["function"]["arguments"].startswith("*** Begin Patch")
    failed = next(m for m in turns if m.tool_call_id == "call_sh_1")
    assert failed.extra["is_error"] is True
    assert failed.content == "1 failed: test_header_only"
    assert [m.meta for m in main.messages if m.meta] == ["system_message"]
    assert main.skipped["assistant.message_delta event (ephemeral)"] == 1

    assert agent.public_id == f"{SESSION_ID}.agent-call_task_1"
    assert agent.parent_id == SESSION_ID
    assert agent.kind == "sub-agent"
    assert [m.role for m in agent.messages] == ["user", "assistant", "tool", "assistant"]


def test_imported_with_auto_detection_linked_and_paired(alice):
    before = EVENTS.read_bytes()
    report = import_path(EVENTS, owner=alice, name=str(EVENTS))
    assert report.errors == []
    assert report.format == "copilot-cli"
    main, agent = report.sessions
    assert agent.parent_id == main.pk
    assert Session.objects.get(pk=main.pk).source == Session.Source.IMPORT_COPILOT_CLI
    for session in (main, agent):
        assert session.fidelity["tool_calls"] == session.fidelity["tool_results_paired"]
        assert session.fidelity["stub_results"] == 0
    assert Message.objects.filter(session=main, is_summary=True, active=True).count() == 1
    assert EVENTS.read_bytes() == before


def _write(tmp_path, events):
    folder = tmp_path / "0000-old"
    folder.mkdir()
    path = folder / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_an_older_log_without_tool_requests_gets_its_calls_from_the_executions(tmp_path):
    path = _write(
        tmp_path,
        [
            {"type": "session.start", "data": {"sessionId": "old"}, "id": "1"},
            {"type": "user.message", "data": {"content": "make the page"}, "id": "2"},
            {"type": "tool.execution_start", "id": "3",
             "data": {"toolCallId": "tc-1", "toolName": "create_file", "arguments": {"path": "a"}}},
            {"type": "tool.execution_complete", "data": {"toolCallId": "tc-1", "result": "ok"}, "id": "4"},
            {"type": "session.compaction_start", "data": {"systemTokens": 10,
             "conversationTokens": 20, "toolDefinitionsTokens": 5}, "id": "5"},
            {"type": "session.compaction_complete", "data": {"success": False}, "id": "6"},
        ],
    )  # fmt: skip
    (session,) = _parse(path)
    assert [m.role for m in session.messages] == ["user", "assistant", "tool"]
    call = session.messages[1].tool_calls[0]
    assert call["function"] == {"name": "create_file", "arguments": '{"path": "a"}'}
    assert session.messages[2].content == "ok"
    assert session.native_compactions == []  # a failed compaction changed nothing
    assert session.skipped["session.compaction_complete that failed (nothing was compacted)"] == 1


def test_tokens_before_from_the_start_event_when_the_end_has_none(tmp_path):
    path = _write(
        tmp_path,
        [
            {"type": "session.start", "data": {"sessionId": "s"}},
            {"type": "user.message", "data": {"content": "q"}},
            {"type": "session.compaction_start", "data": {"systemTokens": 10,
             "conversationTokens": 20, "toolDefinitionsTokens": 5}},
            {"type": "session.compaction_complete",
             "data": {"success": True, "trigger": "manual", "postCompactionTokens": 7}},
        ],
    )  # fmt: skip
    (session,) = _parse(path)
    (compaction,) = session.native_compactions
    assert compaction.tokens_before == 35
    assert compaction.tokens_after == 7
    assert compaction.trigger == "manual"
    assert compaction.marker  # no summary: what the log said is kept
    assert session.messages[0].replaced_by == 0


def test_a_file_that_is_not_an_event_log_is_refused(alice, tmp_path):
    path = _write(tmp_path, [{"type": "hook.start", "data": {}}])
    report = import_path(path, owner=alice, fmt="copilot-cli")
    assert ["no session.start event" in e.problem for e in report.errors] == [True]
